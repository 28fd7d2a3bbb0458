package history

import (
	"fmt"
	"sort"

	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// The steps of a training loop that neither Python frames nor annotations
// show: stacks of C++ frames only, or no stacks at all, in a file without
// Optimizer.step annotations (PyTorch before 2.5, or a training thread
// other than the one that started the recording: the annotation callback
// is thread-local). Every training step runs one backward and touches
// every parameter, and both leave a pattern in the allocations:
//
//   - with C++ frames, the autograd engine's allocations carry its frames
//     (Engine::evaluate_function, AccumulateGrad): each run of them, with
//     no allocation of other code in between, is one step's backward;
//   - without frames, the sizes: the backward's gradients and the
//     optimizer's per-parameter updates allocate blocks the size of the
//     parameters (the blocks allocated before the loop and never freed),
//     a sweep over them once per step, while the forward allocates
//     activations of other sizes.
//
// Such an anchor must recur alike (its allocations within anchorSpread of
// the median anchor's, the allocations between anchors within a factor of
// two of each other) at least minLeakSteps times; a step ends with its
// anchor (the backward and the optimizer's updates: the gradients are
// freed by the next step's zero_grad, the optimizer's state made at the
// first step stays in it). One forward pass — or a forward-only loop —
// has no backward and touches no parameter-sized block per step: it gets
// no steps this way, since nothing tells one of its iterations from one of
// the model's layers. Steps found so are a guess (StepsFromPeriod): leak
// findings on them are medium at most.

// Bounds of the anchors.
const (
	minSweep     = 4   // parameter-sized allocations a sweep holds at least
	sweepSkip    = 2   // other allocations a sweep may skip between two of its own
	anchorMerge  = 4   // anchors fewer than this many other allocations apart are one
	anchorSpread = 0.1 // an anchor's allocations within this share of the median's
	anchorAlike  = 0.8 // share of the anchors that must be alike (the first may differ)
)

// anchor is the events of one step's backward (or parameter sweep), first
// and last, and how many allocations it holds.
type anchor struct{ first, last, allocs int }

// patternSteps finds the steps of a training loop from its backward runs
// (C++ frames) or parameter sweeps (no frames) on a device none of whose
// allocations has Python frames; it recodes the phases of each step from
// its backward run: forward before it, unknown after (the optimizer).
func patternSteps(h *History) planFound {
	ev := h.Device.Events
	sigs := newOuterSigs(h.Snap)
	engine := false
	for i := range ev {
		if ev[i].Action != snapshot.ActionAlloc {
			continue
		}
		if sigs.get(ev[i].Stack).python {
			return planFound{}
		}
		engine = engine || h.Markers.Get(ev[i].Stack).Hint == hintBackward
	}
	sweeps := parameterSweeps(h)
	anchors, what := mergeAnchors(h, sweeps), "each sweep of allocations the size of the parameters (the backward's gradients, the optimizer's updates)"
	if engine {
		anchors, what = withSweeps(h, mergeAnchors(h, backwardRuns(h)), sweeps), "each backward of the autograd engine (its C++ frames) with the optimizer's updates after it"
	}
	if len(anchors) < MinLeakSteps || !anchorsAlike(h, anchors) {
		return planFound{}
	}
	f := planFound{source: result.StepsFromPeriod, evidence: fmt.Sprintf("the repeating pattern of a training step, no frame or annotation telling: %s, %d times", what, len(anchors))}
	start := 0
	for k, a := range anchors {
		f.steps = append(f.steps, StepRange{N: k + 1, Start: start, End: a.last})
		if engine {
			h.Phases.recodeAroundBackward(h, start, a)
		}
		start = a.last + 1
	}
	if start < len(ev) {
		// the next step's start, cut short by the end of the recording
		f.steps = append(f.steps, StepRange{N: len(anchors) + 1, Start: start, End: len(ev) - 1, partial: true})
	}
	return f
}

// backwardRuns returns the runs of the autograd engine's allocations (by
// their frames), a run ending at an allocation of other code with frames
// (frameless allocations and frees belong to no side).
func backwardRuns(h *History) []anchor {
	ev := h.Device.Events
	var out []anchor
	in := false
	for i := range ev {
		if ev[i].Action != snapshot.ActionAlloc {
			continue
		}
		m := h.Markers.Get(ev[i].Stack)
		switch {
		case m.Hint == hintBackward && in:
			a := &out[len(out)-1]
			a.last, a.allocs = i, a.allocs+1
		case m.Hint == hintBackward:
			out = append(out, anchor{first: i, last: i, allocs: 1})
			in = true
		case m.hasFrames:
			in = false
		}
	}
	return out
}

// parameterSweeps returns the runs of allocations the size of a parameter:
// of a block allocated before the recording began and never freed (the
// model's weights when it was built before recording started), else, when
// the recording holds the model's construction, of a block allocated
// before the trace's first free and never freed. A run may skip sweepSkip
// other allocations between two of its own and holds half as many
// allocations as there are parameter blocks, minSweep at least: the
// forward's activations that happen to have a parameter's size (a bf16
// MLP activation of 2h tokens is an fp32 h×4h weight) make short runs.
func parameterSweeps(h *History) []anchor {
	ev := h.Device.Events
	firstFree := len(ev)
	for i := range ev {
		if ev[i].Action == snapshot.ActionFreeRequested || ev[i].Action == snapshot.ActionFreeCompleted {
			firstFree = i
			break
		}
	}
	params := map[int64]bool{}
	count := 0 // parameter blocks
	for _, before := range []int{0, firstFree} {
		for i := range h.Blocks {
			if b := &h.Blocks[i]; b.Free < 0 && !b.Untracked && int(b.Alloc) < before {
				params[b.Size] = true
				count++
			}
		}
		if len(params) > 0 {
			break
		}
	}
	least := max(minSweep, count/2) // a sweep covers half the parameters at least
	var out []anchor
	var cur anchor
	skipped := 0
	flush := func() {
		if cur.allocs >= least {
			out = append(out, cur)
		}
		cur = anchor{}
	}
	for i := range ev {
		bi := h.OpenAt(i)
		if ev[i].Action != snapshot.ActionAlloc || bi < 0 {
			continue
		}
		if !params[h.Blocks[bi].Size] {
			if skipped++; skipped > sweepSkip && cur.allocs > 0 {
				flush()
			}
			continue
		}
		if cur.allocs == 0 {
			cur.first = i
		}
		cur.last, cur.allocs, skipped = i, cur.allocs+1, 0
	}
	flush()
	return fullSweeps(h, out, params)
}

// fullSweeps keeps the sweeps that touch every size a step's sweep
// touches: of the sets of sizes that recur in minLeakSteps sweeps or more,
// the largest (the backward's gradients and the optimizer's updates cover
// every trainable parameter; activations that happen to have a weight's
// size cover some, and only in the iterations whose sequence length
// makes them so).
func fullSweeps(h *History, sweeps []anchor, params map[int64]bool) []anchor {
	sets := make([]map[int64]bool, len(sweeps))
	count := map[string]int{}
	keys := make([]string, len(sweeps))
	for k, a := range sweeps {
		sets[k] = map[int64]bool{}
		for i := a.first; i <= a.last; i++ {
			if bi := h.OpenAt(i); bi >= 0 && h.Device.Events[i].Action == snapshot.ActionAlloc && params[h.Blocks[bi].Size] {
				sets[k][h.Blocks[bi].Size] = true
			}
		}
		sizes := make([]int64, 0, len(sets[k]))
		for sz := range sets[k] {
			sizes = append(sizes, sz)
		}
		sort.Slice(sizes, func(a, b int) bool { return sizes[a] < sizes[b] })
		keys[k] = fmt.Sprint(sizes)
		count[keys[k]]++
	}
	full := -1
	for k := range sweeps {
		if count[keys[k]] >= MinLeakSteps && (full < 0 || len(sets[k]) > len(sets[full])) {
			full = k
		}
	}
	if full < 0 {
		return nil
	}
	var out []anchor
	for k, a := range sweeps {
		covers := true
		for sz := range sets[full] {
			covers = covers && sets[k][sz]
		}
		if covers {
			out = append(out, a)
		}
	}
	return out
}

// withSweeps extends each backward run over the parameter sweeps that
// follow it within anchorMerge other allocations: the optimizer's
// per-parameter updates, which end the step.
func withSweeps(h *History, runs, sweeps []anchor) []anchor {
	k := 0
	for i := range runs {
		a := &runs[i]
		for ; k < len(sweeps) && sweeps[k].last <= a.last; k++ {
		}
		for ; k < len(sweeps) && (sweeps[k].first <= a.last || allocsBetween(h, a.last, sweeps[k].first) < anchorMerge) &&
			(i+1 == len(runs) || sweeps[k].last < runs[i+1].first); k++ {
			a.last = sweeps[k].last
		}
	}
	return runs
}

// mergeAnchors joins anchors fewer than anchorMerge other allocations
// apart: the backward's gradients and the optimizer's updates right after
// them are one step's.
func mergeAnchors(h *History, as []anchor) []anchor {
	var out []anchor
	for _, a := range as {
		if n := len(out); n > 0 && allocsBetween(h, out[n-1].last, a.first) < anchorMerge {
			out[n-1].last, out[n-1].allocs = a.last, out[n-1].allocs+a.allocs
			continue
		}
		out = append(out, a)
	}
	return out
}

// allocsBetween counts the allocations strictly between events i and j.
func allocsBetween(h *History, i, j int) int {
	n := 0
	for k := i + 1; k < j; k++ {
		if h.Device.Events[k].Action == snapshot.ActionAlloc {
			n++
		}
	}
	return n
}

// anchorsAlike reports whether the anchors recur alike: most hold the
// median's allocations within anchorSpread, and the allocations between
// consecutive anchors (the forward) are within a factor of two of their
// median and at least anchorMerge.
func anchorsAlike(h *History, as []anchor) bool {
	sizes := make([]int, len(as))
	for k, a := range as {
		sizes[k] = a.allocs
	}
	med := MedianInt(sizes)
	alike := 0
	for _, n := range sizes {
		if d := float64(n-med) / float64(med); d >= -anchorSpread && d <= anchorSpread {
			alike++
		}
	}
	if float64(alike) < anchorAlike*float64(len(as)) {
		return false
	}
	gaps := make([]int, 0, len(as)-1)
	for k := 1; k < len(as); k++ {
		gaps = append(gaps, allocsBetween(h, as[k-1].last, as[k].first))
	}
	sort.Ints(gaps)
	g := gaps[len(gaps)/2]
	return gaps[0] >= anchorMerge && gaps[0]*2 >= g && gaps[len(gaps)-1] <= 2*g
}

// recodeAroundBackward codes the phases of one step found from its
// backward run a (events start…a.last): the events that no frame marks are
// the forward from the first allocation after allocated memory is lowest
// before the run (the gradients freed by zero_grad) that copies no batch
// to the device, unknown before it; after the run (the
// optimizer's updates) those that only the order of phases made backward
// are unknown. Frees count as unmarked: their frames, when recorded, are
// those of the allocation.
func (p *Phases) recodeAroundBackward(h *History, start int, a anchor) {
	ev := h.Device.Events
	runEnd := a.first
	for k := a.first; k <= a.last; k++ {
		if ev[k].Action == snapshot.ActionAlloc && h.Markers.Get(ev[k].Stack).Hint == hintBackward {
			runEnd = k
		}
	}
	low := start
	var lowest int64
	for k, v := range h.AllocatedRange(start, a.first-1) {
		if k == start || v < lowest {
			low, lowest = k, v
		}
	}
	fwd := a.first // the forward's first allocation: no copy of the batch
	for k := low + 1; k < a.first; k++ {
		if ev[k].Action == snapshot.ActionAlloc && !h.Markers.Get(ev[k].Stack).toDevice {
			fwd = k
			break
		}
	}
	for k := start; k <= a.last && k < len(p.Code); k++ {
		if ev[k].Action == snapshot.ActionAlloc && h.Markers.Get(ev[k].Stack).Hint >= hintInit || k >= a.first && k <= runEnd {
			continue
		}
		switch {
		case k < a.first && k >= fwd:
			p.Code[k] = codeForward
		case p.Code[k] == CodeBackward || p.Code[k] == codeForward:
			p.Code[k] = codeUnknown
		}
	}
}

// MedianInt is the median of v (the upper one of an even count; 0 when v
// is empty).
func MedianInt(v []int) int {
	if len(v) == 0 {
		return 0
	}
	s := append([]int(nil), v...)
	sort.Ints(s)
	return s[len(s)/2]
}
