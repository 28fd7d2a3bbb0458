package history

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// Bounds of the period search over allocation sites.
const (
	minPeriodSteps   = 3      // a period must repeat at least this often
	PeriodMatchMin   = 0.9    // share of allocations whose site recurs one period later
	periodSample     = 50_000 // positions compared per candidate period at most
	periodCandidates = 48     // candidate periods scored at most
	maxSiteUses      = 4      // uses of one site per step the candidate search follows
)

// SiteKey is what the period search compares: the allocation stack, or for
// allocations without frames the phase (backward allocations of a real
// snapshot have no Python frames, but recur in the same order).
func SiteKey(h *History, i int) uint64 {
	e := &h.Device.Events[i]
	if e.Stack != 0 {
		return uint64(e.Stack)
	}
	if e.Meta != 0 {
		return 1<<40 | uint64(e.Meta)
	}
	return 1<<48 | uint64(h.Phases.Code[i])
}

// periodSteps finds steps without annotations: a training or evaluation
// loop allocates from the same sites in the same order every iteration, so
// the sequence of allocation sites is periodic. Candidate periods are the
// regular gaps between recurrences of each site; the one under which most
// allocations recur one period later wins (the smallest when several tie:
// multiples of the period match as well). A model's repeated layers make a
// shorter, weaker period that fails at every step boundary. Steps are then
// cut at the phase of the period where allocated memory is lowest.
func periodSteps(h *History) planFound {
	ev := h.Device.Events
	var allocs []int
	for i := range ev {
		if ev[i].Action == snapshot.ActionAlloc {
			allocs = append(allocs, i)
		}
	}
	n := len(allocs)
	if n < 2*minPeriodSteps {
		return planFound{}
	}
	keys := make([]uint64, n)
	for j, i := range allocs {
		keys[j] = SiteKey(h, i)
	}
	// Distances between the j-th and (j+lag)-th occurrence of each key: a
	// site used lag times per step recurs regularly at lag occurrences.
	pos := map[uint64][]int32{}
	for j, k := range keys {
		pos[k] = append(pos[k], int32(j))
	}
	support := map[int]int{}
	for _, ps := range pos {
		for lag := 1; lag <= maxSiteUses && len(ps) >= lag*minPeriodSteps; lag++ {
			if p, ok := regularDistance(ps, lag); ok && p >= 2 && p*minPeriodSteps <= n {
				support[p]++
			}
		}
	}
	if len(support) == 0 {
		return planFound{}
	}
	cands := make([]int, 0, len(support))
	for p := range support {
		cands = append(cands, p)
	}
	sort.Slice(cands, func(a, b int) bool {
		if support[cands[a]] != support[cands[b]] {
			return support[cands[a]] > support[cands[b]]
		}
		return cands[a] < cands[b]
	})
	if len(cands) > periodCandidates {
		cands = cands[:periodCandidates]
	}
	scores := make([]float64, len(cands))
	top := 0.0
	for i, p := range cands {
		scores[i] = PeriodScore(keys, p)
		top = max(top, scores[i])
	}
	// Best score first; among near ties the shortest period (its multiples
	// match as well). A period whose allocations all come from one call
	// of the same module is a layer of the model, not a step: skip it.
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		x, y := order[a], order[b]
		tx, ty := scores[x] >= top-0.01, scores[y] >= top-0.01
		if tx != ty {
			return tx
		}
		if tx {
			return cands[x] < cands[y]
		}
		return scores[x] > scores[y]
	})
	sigs := newOuterSigs(h.Snap)
	best := 0
	for _, i := range order {
		if scores[i] < PeriodMatchMin {
			break
		}
		if !oneCallPerPeriod(h, sigs, allocs, cands[i]) {
			best = cands[i]
			break
		}
	}
	if best == 0 {
		return planFound{}
	}
	// The offset where memory is lowest across periods: between steps.
	full := n / best * best
	sums := make([]int64, best)
	for j := 0; j < full; j++ {
		sums[j%best] += h.AllocatedAt(allocs[j] - 1)
	}
	off := 0
	for o := range sums {
		if sums[o] < sums[off] {
			off = o
		}
	}
	plan := planFound{source: result.StepsFromPeriod, evidence: fmt.Sprintf("the repeating sequence of allocation sites, %d allocations per step", best)}
	for k := 0; off+(k+1)*best <= n; k++ {
		start := allocs[off+k*best]
		end := len(ev) - 1 // the last full period ends with the trace
		if off+(k+1)*best < n {
			end = allocs[off+(k+1)*best] - 1
		}
		plan.steps = append(plan.steps, StepRange{N: k + 1, Start: start, End: end})
	}
	return plan
}

// PeriodScore is the share of allocations whose site recurs p allocations
// later (sampled on long traces).
func PeriodScore(keys []uint64, p int) float64 {
	m := len(keys) - p
	if m <= 0 {
		return 0
	}
	stride := max(1, m/periodSample)
	match, total := 0, 0
	for i := 0; i < m; i += stride {
		total++
		if keys[i] == keys[i+p] {
			match++
		}
	}
	return float64(match) / float64(total)
}

// regularDistance returns the median distance between occurrence j and
// j+lag of a site, when at least 80% of the distances are within 10% of it.
func regularDistance(ps []int32, lag int) (int, bool) {
	d := make([]int32, 0, len(ps)-lag)
	for j := 0; j+lag < len(ps); j++ {
		d = append(d, ps[j+lag]-ps[j])
	}
	if len(d) < minPeriodSteps-1 {
		return 0, false
	}
	s := append([]int32(nil), d...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	med := int(s[len(s)/2])
	tol := max(1, med/10)
	regular := 0
	for _, x := range d {
		if v := int(x) - med; v >= -tol && v <= tol {
			regular++
		}
	}
	return med, regular*10 >= len(d)*8
}

// oneCallPerPeriod reports whether most periods of p allocations hold
// allocations of a single outer call: the same frames from the outermost
// down to the first frame of the model (inside the outermost nn.Module
// call, or the outermost model forward). That is a layer of a model called
// in a loop (for layer in self.layers: x = layer(x)), whose allocations
// recur with the layer's period within one forward pass; a step of a
// training or evaluation loop also allocates outside that call (the batch,
// the loss, the backward) or at several lines of the model's forward.
// Without Python frames the call structure is unknown: a period counts as
// one call unless it holds both backward allocations and others (a
// training step: forward and backward; a layer of one forward pass, or one
// iteration of a forward-only loop, cannot be told apart).
func oneCallPerPeriod(h *History, sigs *outerSigs, allocs []int, p int) bool {
	ev := h.Device.Events
	periods, single := 0, 0
	for start := 0; start+p <= len(allocs); start += p {
		periods++
		first := sigs.get(ev[allocs[start]].Stack)
		one := true
		python := first.python
		bwd, other := false, false
		for j := start; j < start+p; j++ {
			sg := sigs.get(ev[allocs[j]].Stack)
			python = python || sg.python
			if h.Phases.Code[allocs[j]] == CodeBackward {
				bwd = true
			} else {
				other = true
			}
			if j > start && sg.sig != first.sig {
				one = false
			}
		}
		if !python {
			one = !(bwd && other)
		}
		if one {
			single++
		}
	}
	return periods > 0 && single*2 >= periods
}

// outerSigs memoises the outer call signature of each stack.
type outerSigs struct {
	s    *snapshot.Snapshot
	memo map[snapshot.StackID]outerSig
}

// outerSig is the outer call of a stack; python says whether it has Python
// frames (or model spans) at all. call is sig with the model's own frame
// named by its file and function, not its line: the same call of the model,
// wherever in it the allocation is made.
type outerSig struct {
	sig, call string
	python    bool
}

func newOuterSigs(s *snapshot.Snapshot) *outerSigs {
	return &outerSigs{s: s, memo: map[snapshot.StackID]outerSig{}}
}

// get returns the frames of a stack from the outermost down to the first
// frame of the model: the first frame inside the outermost nn.Module call,
// or the outermost model forward (the whole Python stack when there is no
// model frame; the stack's id without Python frames or module spans).
func (o *outerSigs) get(st snapshot.StackID) outerSig {
	if v, ok := o.memo[st]; ok {
		return v
	}
	frames := o.s.StackOf(st)
	var b []byte
	call := -1 // length of b before the model's own frame
	var modelFrame *snapshot.Frame
	inCall, hasPy := false, false
	for i := len(frames) - 1; i >= 0; i-- {
		f := &o.s.Frames[frames[i]]
		model := IsModelFrame(f)
		if !model && !IsPython(f) {
			continue
		}
		hasPy = true
		n := len(b)
		b = strconv.AppendUint(b, uint64(frames[i]), 36)
		b = append(b, ' ')
		if model && f.Name != "forward" {
			inCall = true // a module call: the model's own frame follows
			continue
		}
		if inCall || model {
			call, modelFrame = n, f
			break
		}
	}
	v := outerSig{python: hasPy}
	if hasPy {
		v.sig, v.call = string(b), string(b)
		if modelFrame != nil {
			v.call = string(b[:call]) + modelFrame.Filename + "\x00" + modelFrame.Name
		}
	} else if st != 0 {
		v.sig = "stack " + strconv.FormatUint(uint64(st), 10)
		v.call = v.sig
	}
	o.memo[st] = v
	return v
}
