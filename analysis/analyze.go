package analysis

import (
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/analysis/leaks"
	"github.com/torchmem/torchmem/analysis/suggest"
	"github.com/torchmem/torchmem/analysis/whatif"
	"github.com/torchmem/torchmem/internal/beside"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// Options controls Analyze.
type Options struct {
	// Device selects one device by ID; −1 analyses every device. Note that
	// the zero value selects device 0: start from DefaultOptions.
	Device int
	// TopSites is how many allocation sites to list (default 10).
	TopSites int
	// MaxTimelinePoints bounds DeviceResult.Timeline (default 20,000).
	MaxTimelinePoints int
	// NoTimeline skips the timeline (for JSON-only callers).
	NoTimeline bool
	// CapacityBytes is the device memory the what-if projections must fit
	// (--gpu); 0 takes the file's device capacity when it records one.
	CapacityBytes int64
}

// DefaultOptions analyses every device, lists 10 sites and keeps a timeline
// of at most 20,000 points.
func DefaultOptions() Options {
	return Options{Device: -1, TopSites: 10, MaxTimelinePoints: DefaultMaxTimelinePoints}
}

// Analyze runs every pass over a snapshot or chrome trace and returns the
// Result (schema torchmem.analysis/v1).
func Analyze(s *snapshot.Snapshot, opts Options) *result.Result {
	r, _ := analyze(s, opts)
	return r
}

// analyze is Analyze that also returns the history of the device the
// suggestions and the what-if are about (nil when no device has one).
func analyze(s *snapshot.Snapshot, opts Options) (*result.Result, *history.History) {
	if opts.TopSites <= 0 {
		opts.TopSites = 10
	}
	if opts.MaxTimelinePoints <= 0 {
		opts.MaxTimelinePoints = DefaultMaxTimelinePoints
	}
	r := &result.Result{
		Schema:        result.SchemaID,
		AllocatedUnit: result.AllocatedUnit,
		Input: result.Input{Path: s.Source.Path, Format: string(s.Source.Format), Generation: s.Source.Generation,
			Bytes: s.Source.FileBytes, Recording: string(s.Recording), ReadBytes: s.Source.Bytes},
		Devices:     []result.DeviceResult{},
		Leaks:       []result.Leak{},
		Suggestions: []result.Suggestion{},
		Diagnostics: readerDiagnostics(s),
	}
	if s.Source.Format == snapshot.FormatMemoryTimeline {
		r.AllocatedUnit = result.AllocatedUnitTensor
	}
	if d := s.Source.Distributed; d != nil {
		r.Input.Distributed = &result.Distributed{Rank: d.Rank, WorldSize: d.WorldSize, Backend: d.Backend}
	}
	if r.Input.Format == string(snapshot.FormatSnapshotPickle) || r.Input.Format == string(snapshot.FormatSegmentList) || r.Input.Format == string(snapshot.FormatTracePlotHTML) {
		r.Input.Format = "snapshot"
	}
	var best *suggest.Evidence
	var bestH *history.History
	var bestDR int
	var hs []*history.History
	ann := &history.AnnIntervals{}
	for _, d := range s.Devices {
		if opts.Device >= 0 && d.ID != opts.Device {
			continue
		}
		if len(d.Events) == 0 && len(d.Segments) == 0 {
			continue
		}
		hs = append(hs, history.BuildWithAnnotations(s, d, ann))
	}
	// Accelerators first: a chrome trace's host memory (the CPU, device −1)
	// comes after them, and is the evidence for suggestions only when it is
	// all there is.
	sort.SliceStable(hs, func(a, b int) bool {
		return hs[a].Device.Kind != snapshot.DeviceCPU && hs[b].Device.Kind == snapshot.DeviceCPU
	})
	accelerators := slices.ContainsFunc(hs, func(h *history.History) bool { return h.Device.Kind != snapshot.DeviceCPU })
	texts := history.NewFrameTexts(s) // shared by the devices' results, made one after the other
	for _, h := range hs {
		h.Texts = texts
	}
	// Leak detection only reads the histories: it runs beside the rest. So
	// do the lists of each device's result (its sites, phase peaks,
	// timeline, allocations), which the suggestions and the what-if do not
	// read: one goroutine makes them, device after device, while this one
	// gathers the evidence, suggests and projects. A panic of either comes
	// back here when it is waited for. (A chrome trace's lists were once
	// made here, their scratch beside the what-if's raising the 1 GB
	// generated trace's peak RSS from 285 to 300 MB; since the trace's
	// round nine, beside or not, its peak is 235-237 MiB, and the command
	// 0.06 s shorter beside.)
	var found []result.Leak
	waitLeaks := beside.Go(func() { found = leaks.Detect(s, hs) })
	pending := make(chan *deviceLists, len(hs))
	waitLists := beside.Go(func() {
		for l := range pending {
			l.make()
		}
	})
	closePending := sync.OnceFunc(func() { close(pending) })
	defer closePending() // a panic here still ends the goroutine
	lists := make([]*deviceLists, 0, len(hs))
	bestOOM := false
	for _, h := range hs {
		dr, l := deviceHead(h, opts)
		pending <- l
		lists = append(lists, l)
		r.Devices = append(r.Devices, dr)
		if accelerators && h.Device.Kind == snapshot.DeviceCPU {
			continue
		}
		ev := suggest.Gather(h, &dr)
		switch {
		case best == nil,
			dr.OOM != nil && !bestOOM,
			dr.OOM == nil && !bestOOM && ev.PeakAlloc > best.PeakAlloc:
			best, bestOOM, bestH, bestDR = ev, dr.OOM != nil, h, len(r.Devices)-1
		}
	}
	closePending()
	waitLeaks()
	r.Leaks = found
	if r.Leaks == nil {
		r.Leaks = []result.Leak{}
	}
	r.Suggestions = suggest.From(best, r.Leaks)
	if bestH != nil {
		capacity := opts.CapacityBytes
		if capacity == 0 {
			capacity = r.Devices[bestDR].Capacity
		}
		r.WhatIf = whatif.Compute(bestH, &r.Devices[bestDR], r.Suggestions, capacity, best.SeqSquared())
		if suggest.ReconcileSavings(r, best.StatesFirst) {
			r.WhatIf = whatif.Compute(bestH, &r.Devices[bestDR], r.Suggestions, capacity, best.SeqSquared())
		}
	}
	waitLists()
	for i, l := range lists {
		l.fill(&r.Devices[i])
		r.Diagnostics = append(r.Diagnostics, deviceDiagnostics(hs[i], &r.Devices[i])...)
	}
	nameHostDiagnostics(r)
	return r, bestH
}

// nameHostDiagnostics words the notes about host memory (device −1 of a
// chrome trace, "device -1: …" where they are written) as "cpu: …".
func nameHostDiagnostics(r *result.Result) {
	for i := range r.Diagnostics {
		d := &r.Diagnostics[i]
		if rest, ok := strings.CutPrefix(d.Message, "device -1:"); ok && d.Device == -1 {
			d.Message = result.DeviceName(string(snapshot.DeviceCPU), -1) + ":" + rest
		}
	}
}

// reservedKnown reports whether the file states the device's reserved
// memory: dump-time segments, or a chrome trace's Total Reserved on an
// accelerator (a CPU's is always 0: the host allocator caches nothing).
func reservedKnown(h *history.History) bool {
	d := h.Device
	return len(d.Segments) > 0 || len(d.Reserved) > 0 && d.Kind != snapshot.DeviceCPU
}
