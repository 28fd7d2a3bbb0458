package leaks

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// This file makes the reference_cycle finding: survivors of several steps
// released together by a later step (the sawtooth).

// cycleFinding looks for the sawtooth: survivors of several steps released
// together by a later step.
func (sc *leakScan) cycleFinding() (result.Leak, bool) {
	if len(sc.delayed) == 0 {
		return result.Leak{}, false
	}
	type release struct {
		from       map[int]bool
		blocks     []int
		bytes      int64
		first, end int // event range of the frees
	}
	rel := map[int]*release{}
	var delayedBytes int64
	for _, d := range sc.delayed {
		r := rel[d.upto]
		if r == nil {
			r = &release{from: map[int]bool{}, first: math.MaxInt, end: -1}
			rel[d.upto] = r
		}
		b := &sc.h.Blocks[d.bi]
		r.from[d.from] = true
		r.blocks = append(r.blocks, d.bi)
		r.bytes += b.Size
		r.first, r.end = min(r.first, int(b.Free)), max(r.end, int(b.Free))
		delayedBytes += b.Size
	}
	var collections []int
	var collected int64
	maxFrom := 0
	bulk := true
	for m, r := range rel {
		if len(r.from) < 2 {
			continue
		}
		collections = append(collections, m)
		collected += r.bytes
		maxFrom = max(maxFrom, len(r.from))
		allocs := 0
		for i := r.first; i <= r.end; i++ {
			if sc.h.Device.Events[i].Action == snapshot.ActionAlloc {
				allocs++
			}
		}
		if allocs > len(r.blocks)/4+2 {
			bulk = false
		}
	}
	sort.Ints(collections)
	if len(collections) == 0 || len(collections) == 1 && maxFrom < 3 {
		return result.Leak{}, false
	}
	if float64(collected) < explainedGrowth*float64(delayedBytes) || collected < minGrowthBytes {
		return result.Leak{}, false
	}
	// The blocks of each release: the survivors it frees and, in the same
	// burst, those of the step just before (too young to be survivors).
	isColl := map[int]bool{}
	for _, m := range collections {
		isColl[m] = true
	}
	perFrom := map[int]int64{}
	var blocks []int
	for _, d := range sc.delayed {
		if isColl[d.upto] {
			perFrom[d.from] += sc.h.Blocks[d.bi].Size
			blocks = append(blocks, d.bi)
		}
	}
	ev := sc.h.Device.Events
	for _, m := range collections {
		r := rel[m]
		sites := map[string]bool{}
		for _, bi := range r.blocks {
			sites[sc.site(bi)] = true
		}
		// The burst: the frees around the survivors' frees, up to the
		// nearest allocations.
		lo, hi := r.first, r.end
		for lo > 0 && ev[lo-1].Action != snapshot.ActionAlloc {
			lo--
		}
		for hi+1 < len(ev) && ev[hi+1].Action != snapshot.ActionAlloc {
			hi++
		}
		for i := lo; i <= hi; i++ {
			bi := sc.h.CloseAt(i)
			if bi < 0 {
				continue
			}
			b := &sc.h.Blocks[bi]
			if b.Alloc >= 0 && sc.stepAt(int(b.Alloc)) == m-1 && sites[sc.site(int(bi))] {
				perFrom[m-1] += b.Size
				blocks = append(blocks, int(bi))
				r.bytes += b.Size
				r.from[m-1] = true
			}
		}
	}
	var per []int64
	for _, v := range perFrom {
		per = append(per, v)
	}
	held := sc.maxLiveAtStepEnds(blocks)
	groups := sc.bySite(blocks)
	perStep := leakMedian64(per)
	var from []int
	for k := range perFrom {
		from = append(from, k)
	}
	sort.Ints(from)
	l := result.Leak{Kind: result.LeakReferenceCycle, Device: sc.h.Device.ID, Site: groups[0].site, BytesPerStep: perStep, Steps: len(perFrom), TotalBytes: held,
		SeenInSteps: sc.stepNumbers(from)}
	switch {
	case len(collections) >= 2 && bulk && leakCV(per) <= 0.5 && held >= highLeakBytes:
		l.Confidence = result.High
	case len(collections) >= 2 || maxFrom >= 3:
		l.Confidence = result.Medium
	default:
		l.Confidence = result.Low
	}
	l.Confidence = sc.capConfidence(l.Confidence)
	var at []string
	for _, m := range collections {
		r := rel[m]
		at = append(at, fmt.Sprintf("step %d freed %s from %d earlier steps", sc.steps[m].N, units.FormatBytes(r.bytes), len(r.from)))
	}
	how := "together"
	if bulk {
		how = "in one burst of frees"
	}
	l.Evidence = fmt.Sprintf("Tensors allocated at %s (%s per step) stay allocated across several steps and are then released %s: %s. Up to %s is held at once.",
		groups[0].site, units.FormatBytes(perStep), how, strings.Join(at, "; "), units.FormatBytes(held))
	l.Explanation = "A sawtooth: tensors freed in bulk long after their step are kept by objects in a reference cycle, which only Python's garbage collector (gc.collect) frees."
	l.Remedy = "Break the cycle so that reference counting frees the tensors at the end of each step: do not store tensors on objects that reference themselves (self.cache = {..., 'owner': self}, closures or hooks capturing the module, a kept exception with its traceback); use weakref or del the references each step; store .detach() copies. As a stopgap, call gc.collect() every step."
	l.Fix = l.Remedy + fmt.Sprintf(" Saves up to %s at the peak.", units.FormatBytes(held))
	return l, true
}

// maxLiveAtStepEnds is the most bytes of the given blocks live at the end
// of any step.
func (sc *leakScan) maxLiveAtStepEnds(blocks []int) int64 {
	type delta struct {
		at   int
		size int64
	}
	ds := make([]delta, 0, 2*len(blocks))
	for _, bi := range blocks {
		b := &sc.h.Blocks[bi]
		ds = append(ds, delta{int(b.Alloc), b.Size})
		if b.Free >= 0 {
			ds = append(ds, delta{int(b.Free), -b.Size})
		}
	}
	sort.Slice(ds, func(a, b int) bool { return ds[a].at < ds[b].at })
	var live, held int64
	j := 0
	for _, st := range sc.steps {
		for j < len(ds) && ds[j].at <= st.End {
			live += ds[j].size
			j++
		}
		held = max(held, live)
	}
	return held
}
