package analysis

import (
	"fmt"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// deviceResult assembles the result of one device from its history.
func deviceResult(h *history.History, opts Options) result.DeviceResult {
	dr, lists := deviceHead(h, opts)
	lists.make()
	lists.fill(&dr)
	return dr
}

// deviceLists are the parts of a device's result that nothing else in the
// analysis reads — its sites, the peaks of its phases, the classification
// rules, the timeline and the allocations at the peak and the OOM — made
// apart from the rest (deviceHead) so that Analyze can make them on one
// core while the suggestions and the what-if take the other. make writes
// only the deviceLists itself and the frames' display texts (which
// History.DisplayStack guards); it reads the history and the file, which
// nothing changes once the history is built, but must not use the
// history's Markers, whose memo the evidence fills as it goes. fill copies
// the lists into the result.
type deviceLists struct {
	h     *history.History
	opts  Options
	sites *history.SiteCache
	// peak, oom and focus are the events deviceHead found (oom −1: none;
	// focus is the OOM, else the peak); nOOM is the number of oom events.
	peak, oom, focus, nOOM int

	topSites          []result.Site
	phasePeaks        []result.PhasePeak
	rules             []result.RuleUse
	timeline          *result.Timeline
	peakAllocs, oomAt *result.AllocationsAt
}

// deviceHead is the part of deviceResult that the suggestions and the
// what-if read (the state at the end and at the peak, the OOM's
// post-mortem), and what the rest of the result needs to be made.
func deviceHead(h *history.History, opts Options) (result.DeviceResult, *deviceLists) {
	d := h.Device
	sites := h.NewSiteCache()
	end := h.EndIndex()
	dr := result.DeviceResult{Device: d.ID, Kind: string(d.Kind), Capacity: d.CapacityBytes,
		Phases: h.Phases.Spans, Steps: h.Steps.StepPlan, TopSites: []result.Site{}}
	if dr.Phases == nil {
		dr.Phases = []result.PhaseSpan{}
	}
	dr.AtEnd = result.State{AllocatedBytes: h.AllocatedAt(end), RequestedBytes: h.RequestedOrNil(end), ReservedBytes: h.ReservedAt(end), Categories: h.CategoriesAt(end)}
	if len(d.Segments) > 0 {
		var res int64
		for gi := range d.Segments {
			res += d.Segments[gi].TotalSize
		}
		dr.AtEnd.ReservedBytes = res
		fr := history.FragmentationAt(h, end, 0)
		dr.AtEnd.Fragmentation = &fr
	}
	dr.NoHistory = len(d.Events) == 0 || h.Snap.Recording == snapshot.RecordingState

	peak, _ := h.Peak()
	if len(d.Events) == 0 {
		peak = end
	}
	dr.Peak = result.Peak{AllocatedBytes: h.AllocatedAt(peak), RequestedBytes: h.RequestedOrNil(peak), ReservedBytes: h.ReservedAt(peak), TimeUS: h.TimeUS(peak),
		EventIndex: peak, Phase: h.Phases.At(peak), Step: h.Phases.StepAt(peak), Categories: h.CategoriesAt(peak)}
	if len(d.Events) == 0 {
		dr.Peak.ReservedBytes = dr.AtEnd.ReservedBytes
	}
	if peak < 0 { // the state before the first event: no event, no time
		dr.Peak.TimeUS = 0
	}
	if !reservedKnown(h) {
		dr.AtEnd.ReservedBytes, dr.AtEnd.ReservedUnknown = 0, true
		dr.Peak.ReservedBytes, dr.Peak.ReservedUnknown = 0, true
	}

	oom, nOOM := -1, 0
	for i := range d.Events {
		if d.Events[i].Action == snapshot.ActionOOM {
			if oom < 0 {
				oom = i
			}
			nOOM++
		}
	}
	focus := peak
	if oom >= 0 {
		dr.OOM = oomAt(h, sites, oom, opts.TopSites)
		focus = oom
	}
	return dr, &deviceLists{h: h, opts: opts, sites: sites, peak: peak, oom: oom, focus: focus, nOOM: nOOM}
}

// make computes the lists.
func (l *deviceLists) make() {
	h, opts := l.h, l.opts
	l.topSites = h.TopSitesIn(l.sites, l.focus, opts.TopSites)
	l.phasePeaks = phasePeaks(h, l.sites, opts.TopSites)
	l.rules = h.RuleUses(h.EndIndex())
	if !opts.NoTimeline && len(h.Device.Events) > 0 {
		l.timeline = buildTimeline(h, l.peak, l.oom, opts.MaxTimelinePoints)
		l.peakAllocs = allocationsAt(h, l.sites, l.peak)
		if l.oom >= 0 {
			l.oomAt = allocationsAt(h, l.sites, l.oom)
		}
	}
}

// fill puts the lists into dr, the result deviceHead began, and notes
// several OOMs among the history's diagnostics.
func (l *deviceLists) fill(dr *result.DeviceResult) {
	dr.TopSites, dr.PhasePeaks, dr.Rules = l.topSites, l.phasePeaks, l.rules
	dr.Timeline, dr.PeakAllocations = l.timeline, l.peakAllocs
	if dr.OOM != nil {
		dr.OOM.Allocations = l.oomAt
	}
	if l.nOOM > 1 {
		d := l.h.Device
		l.h.Diags = append(l.h.Diags, result.Diagnostic{Kind: "several_ooms", Device: d.ID, Message: fmt.Sprintf("device %d: %d oom entries; the post-mortem is of the first (event %d)", d.ID, l.nOOM, l.oom)})
	}
}
