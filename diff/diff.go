// Package diff compares two analyses of the same job (torchmem diff): the
// devices, peaks, categories, phases, steps, sites, OOMs and leaks of a base
// run against a new one. Sites are matched by their user frame, or by file
// and function when the code moved (SiteMatch, which check uses too).
package diff

import (
	"fmt"
	"sort"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// Diff compares two analyses: base (the reference run) and new. Devices
// are matched by id; a device in only one run is listed with the other
// side's numbers 0. Diff does not modify its arguments.
func Diff(base, new *result.Result) *Result {
	d := &Result{Schema: DiffSchemaID, Base: base.Input, New: new.Input, Devices: []DeviceDiff{}, Leaks: []LeakDiff{}}
	bd := map[int]*result.DeviceResult{}
	nd := map[int]*result.DeviceResult{}
	var ids []int
	for i := range base.Devices {
		if _, ok := bd[base.Devices[i].Device]; !ok {
			bd[base.Devices[i].Device] = &base.Devices[i]
			ids = append(ids, base.Devices[i].Device)
		}
	}
	for i := range new.Devices {
		if _, ok := nd[new.Devices[i].Device]; !ok {
			nd[new.Devices[i].Device] = &new.Devices[i]
			if bd[new.Devices[i].Device] == nil {
				ids = append(ids, new.Devices[i].Device)
			}
		}
	}
	sort.Ints(ids)
	for _, id := range ids {
		d.Devices = append(d.Devices, diffDevice(id, bd[id], nd[id]))
	}
	d.Leaks = diffLeaks(base.Leaks, new.Leaks)
	return d
}

// diffDevice compares one device; b or n is nil when the device is absent
// from that run.
func diffDevice(id int, b, n *result.DeviceResult) DeviceDiff {
	var zero result.DeviceResult
	dd := DeviceDiff{Device: id, Presence: InBoth}
	switch {
	case b == nil:
		dd.Presence, b = OnlyNew, &zero
	case n == nil:
		dd.Presence, n = OnlyBase, &zero
	}
	dd.Kind = n.Kind
	if dd.Kind == "" {
		dd.Kind = b.Kind
	}
	dd.PeakAllocated = NewDelta(b.Peak.AllocatedBytes, n.Peak.AllocatedBytes)
	dd.PeakReserved = NewDelta(b.Peak.ReservedBytes, n.Peak.ReservedBytes)
	dd.EndAllocated = NewDelta(b.AtEnd.AllocatedBytes, n.AtEnd.AllocatedBytes)
	dd.EndReserved = NewDelta(b.AtEnd.ReservedBytes, n.AtEnd.ReservedBytes)
	dd.PeakPhase = PhasePair{Base: b.Peak.Phase, New: n.Peak.Phase}
	for c := result.Category(0); c < result.NumCategories; c++ {
		dd.Categories = append(dd.Categories, CategoryDiff{Category: c,
			Peak: NewDelta(b.Peak.Categories[c], n.Peak.Categories[c]),
			End:  NewDelta(b.AtEnd.Categories[c], n.AtEnd.Categories[c])})
	}
	dd.Phases = diffPhases(b.Phases, n.Phases)
	dd.Steps = diffSteps(b.Phases, n.Phases)
	match := MatchSites(b, n)
	dd.Sites = diffSites(b.TopSites, n.TopSites, match)
	if bs, ns, at, ok := phaseSitesToCompare(b, n); ok {
		dd.PhaseSites, dd.PhaseSitesAt = diffSites(bs, ns, match), at
	}
	dd.OOM = diffOOM(b.OOM, n.OOM)
	return dd
}

// PhasePeaks returns the highest peak of each phase over all steps, and the
// phases in the order they first occur.
func PhasePeaks(spans []result.PhaseSpan) (map[result.Phase]int64, []result.Phase) {
	peak := map[result.Phase]int64{}
	var order []result.Phase
	for _, s := range spans {
		if v, ok := peak[s.Phase]; !ok {
			order = append(order, s.Phase)
			peak[s.Phase] = s.PeakAllocatedBytes
		} else if s.PeakAllocatedBytes > v {
			peak[s.Phase] = s.PeakAllocatedBytes
		}
	}
	return peak, order
}

func diffPhases(b, n []result.PhaseSpan) []PhaseDiff {
	bp, border := PhasePeaks(b)
	np, norder := PhasePeaks(n)
	out := []PhaseDiff{}
	for _, ph := range border {
		pr := InBoth
		if _, ok := np[ph]; !ok {
			pr = OnlyBase
		}
		out = append(out, PhaseDiff{Phase: ph, Presence: pr, Peak: NewDelta(bp[ph], np[ph])})
	}
	for _, ph := range norder {
		if _, ok := bp[ph]; !ok {
			out = append(out, PhaseDiff{Phase: ph, Presence: OnlyNew, Peak: NewDelta(0, np[ph])})
		}
	}
	return out
}

// stepPeaks returns the highest peak of each step.
func stepPeaks(spans []result.PhaseSpan) map[int]int64 {
	peak := map[int]int64{}
	for _, s := range spans {
		if v, ok := peak[s.Step]; !ok || s.PeakAllocatedBytes > v {
			peak[s.Step] = s.PeakAllocatedBytes
		}
	}
	return peak
}

func diffSteps(b, n []result.PhaseSpan) []StepDiff {
	bp, np := stepPeaks(b), stepPeaks(n)
	steps := make([]int, 0, len(bp)+len(np))
	for s := range bp {
		steps = append(steps, s)
	}
	for s := range np {
		if _, ok := bp[s]; !ok {
			steps = append(steps, s)
		}
	}
	sort.Ints(steps)
	out := make([]StepDiff, 0, len(steps))
	for _, s := range steps {
		_, inB := bp[s]
		_, inN := np[s]
		pr := InBoth
		switch {
		case !inB:
			pr = OnlyNew
		case !inN:
			pr = OnlyBase
		}
		out = append(out, StepDiff{Step: s, Presence: pr, Peak: NewDelta(bp[s], np[s])})
	}
	return out
}

// phaseSitesToCompare picks the sites of both runs at the peak of the
// phase where the new run peaked (like with like); ok is false when either
// run has no peak of that phase (or no phase peaks at all).
func phaseSitesToCompare(b, n *result.DeviceResult) (bs, ns []result.Site, at string, ok bool) {
	ph := n.Peak.Phase
	bp, np := b.PhasePeakOf(ph), n.PhasePeakOf(ph)
	if bp == nil || np == nil {
		return nil, nil, "", false
	}
	return bp.TopSites, np.TopSites, fmt.Sprintf("the %s peak", ph), true
}

// diffSites compares two lists of sites (b and n, of the same moment);
// every site each run lists (in match) decides whether a site is new,
// vanished, or the same code moved to another line.
func diffSites(b, n []result.Site, match SiteMatch) []SiteDiff {
	type side struct {
		bytes int64
		count int
		cat   result.Category
		seen  bool
	}
	bm := map[string]side{}
	for _, s := range b {
		v := bm[s.Site]
		bm[s.Site] = side{units.SatAdd(v.bytes, s.Bytes), v.count + s.Count, s.Category, true}
	}
	nm := map[string]side{}
	for _, s := range n {
		v := nm[s.Site]
		nm[s.Site] = side{units.SatAdd(v.bytes, s.Bytes), v.count + s.Count, s.Category, true}
	}
	bAll, nAll, moved, movedTo := match.bAll, match.nAll, match.moved, match.movedTo
	out := []SiteDiff{}
	add := func(site, baseSite string, bs, ns side) {
		pr, cat := InBoth, ns.cat
		switch {
		case !ns.seen && !nAll[site]:
			pr, cat = OnlyBase, bs.cat
		case !ns.seen:
			cat = bs.cat
		case !bs.seen && baseSite == "" && !bAll[site]:
			pr = OnlyNew
		}
		sd := SiteDiff{Site: site, Presence: pr, Bytes: NewDelta(bs.bytes, ns.bytes),
			Count: NewDelta(int64(bs.count), int64(ns.count)), Category: cat}
		if baseSite != "" && baseSite != site {
			sd.BaseSite = baseSite
		}
		out = append(out, sd)
	}
	done := map[string]bool{} // new names added
	for site, bs := range bm {
		if to, ok := movedTo[site]; ok {
			add(to, site, bs, nm[to])
			done[to] = true
			continue
		}
		add(site, site, bs, nm[site])
		done[site] = true
	}
	for site, ns := range nm {
		if done[site] {
			continue
		}
		add(site, moved[site], bm[moved[site]], ns)
	}
	sort.Slice(out, func(i, j int) bool {
		ai, aj := diffAbs(out[i].Bytes.Delta), diffAbs(out[j].Bytes.Delta)
		if ai != aj {
			return ai > aj
		}
		if out[i].Bytes.New != out[j].Bytes.New {
			return out[i].Bytes.New > out[j].Bytes.New
		}
		return out[i].Site < out[j].Site
	})
	return out
}

func diffAbs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func diffOOM(b, n *result.OOM) OOMDiff {
	d := OOMDiff{Base: oomBrief(b), New: oomBrief(n)}
	switch {
	case b != nil && n != nil:
		d.Status = OOMBoth
	case n != nil:
		d.Status = OOMAdded
	case b != nil:
		d.Status = OOMFixed
	default:
		d.Status = OOMNone
	}
	return d
}

func oomBrief(o *result.OOM) *OOMBrief {
	if o == nil {
		return nil
	}
	return &OOMBrief{RequestedBytes: o.RequestedBytes, DeviceFreeBytes: o.DeviceFreeBytes, AllocatedBytes: o.AllocatedBytes,
		Phase: o.Phase, Step: o.Step, Site: o.Site}
}

// diffLeaks matches leak findings by device, kind and site.
func diffLeaks(b, n []result.Leak) []LeakDiff {
	type key struct {
		dev        int
		kind, site string
	}
	nm := map[key]*result.Leak{}
	for i := range n {
		k := key{n[i].Device, n[i].Kind, n[i].Site}
		if cur, ok := nm[k]; !ok || n[i].BytesPerStep > cur.BytesPerStep {
			nm[k] = &n[i]
		}
	}
	bmax := map[key]int64{} // the base's largest per step of each finding (one pass: linear)
	for i := range b {
		k := key{b[i].Device, b[i].Kind, b[i].Site}
		bmax[k] = max(bmax[k], b[i].BytesPerStep)
	}
	out := []LeakDiff{}
	used := map[key]bool{}
	for i := range b {
		k := key{b[i].Device, b[i].Kind, b[i].Site}
		if used[k] {
			continue
		}
		used[k] = true
		ld := LeakDiff{Device: k.dev, Kind: k.kind, Site: k.site, Presence: OnlyBase, Confidence: b[i].Confidence}
		var nb int64
		if l, ok := nm[k]; ok {
			ld.Presence, ld.Confidence, nb = InBoth, l.Confidence, l.BytesPerStep
		}
		ld.BytesPerStep = NewDelta(bmax[k], nb)
		out = append(out, ld)
	}
	for i := range n {
		k := key{n[i].Device, n[i].Kind, n[i].Site}
		if used[k] {
			continue
		}
		used[k] = true
		l := nm[k]
		out = append(out, LeakDiff{Device: k.dev, Kind: k.kind, Site: k.site, Presence: OnlyNew, Confidence: l.Confidence,
			BytesPerStep: NewDelta(0, l.BytesPerStep)})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Device != out[j].Device {
			return out[i].Device < out[j].Device
		}
		return diffAbs(out[i].BytesPerStep.Delta) > diffAbs(out[j].BytesPerStep.Delta)
	})
	return out
}
