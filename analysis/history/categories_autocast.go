package history

import (
	"fmt"
	"sort"
	"strings"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// RuleAutocastWeightCache classifies autocast's weight cache: under
// torch.autocast, the first use of an fp32 weight in a region casts it to a
// 16-bit copy that autocast caches until the region exits (or, under grad
// mode, until the graph that saved it dies). The copies are a category of
// their own (autocast_cache) — never activations, inputs, parameters or a
// leak.
const RuleAutocastWeightCache = "autocast_weight_cache"

// markAutocastCache finds autocast's weight copies among the blocks
// classified so far and gives them the autocast_cache category. A copy
// requests half the bytes of an fp32 parameter (its element count at 2
// bytes; the parameters are the blocks classified so, or the weights a
// chrome trace's AccumulateGrad ops name); it is made in forward — or in
// backward, recomputing a checkpointed forward — by the op that uses the
// weight: autocast's cast in its C++ frames, an aten::_to_copy inside the
// compute op in a chrome trace, or — Python frames only — the first
// allocation of the op (the one before is another op's or another copy),
// followed by another of the same stack; it lives until the end, until the
// region exits (autocast_mode.py __exit__ in its free stack, or freed with
// other copies in one burst, no allocation between), or until backward
// frees the graph that saved it (then, with Python frames only, the run
// must show autocast at work, e.g. backward casting the copies' gradients
// to fp32: castsGradients). The projections keep these blocks fixed: this
// is their one detector of weight copies. A size class where more copies live at
// once than parameters of twice the size exist is not a cache (a
// coincidence of sizes): none of it is marked. Without frames nothing tells
// a copy apart.
func markAutocastCache(h *History) {
	params := map[int64]int{} // requested bytes of the fp32 parameters
	for i := range h.Blocks {
		b := &h.Blocks[i]
		if b.Category == result.Parameter && !b.Untracked && b.Requested > 0 && b.Requested%4 == 0 {
			params[b.Requested]++
		}
	}
	if len(params) == 0 {
		// A chrome trace's weights predate its window: AccumulateGrad's
		// shapes name them (one backward's worth).
		for _, g := range h.Snap.GradAccumulations {
			if g.DType == "float" && g.Elements > 0 {
				params[4*g.Elements]++
			}
		}
		for sz, n := range params {
			params[sz] = max(1, n/h.backwardPasses())
		}
	}
	if len(params) == 0 {
		return
	}
	// weightOf is the bytes of the fp32 weight a block would copy (0: none
	// of that size). A chrome trace has the allocator's blocks only: a
	// copy's block may hold up to 1 MiB more than the copy (a rest the
	// large pool does not split off).
	exact := h.Snap.Source.Format != snapshot.FormatChromeTrace
	halves := make([]int64, 0, len(params))
	for w := range params {
		halves = append(halves, w/2)
	}
	sort.Slice(halves, func(a, b int) bool { return halves[a] < halves[b] })
	weightOf := func(b *Block) int64 {
		if exact {
			if params[2*b.Requested] > 0 {
				return 2 * b.Requested
			}
			return 0
		}
		k := sort.Search(len(halves), func(i int) bool { return halves[i] > b.Size }) - 1
		if k >= 0 && b.Size-halves[k] <= 1<<20 && (&SizingRules{}).Round(halves[k]) <= b.Size {
			return 2 * halves[k]
		}
		return 0
	}
	found := false
	for i := range h.Blocks {
		b := &h.Blocks[i]
		if b.Alloc >= 0 && b.Category != result.Parameter && weightOf(b) > 0 {
			found = true
			break
		}
	}
	if !found {
		return
	}
	ev := h.Device.Events
	// prevAlloc/nextAlloc: the allocation event before/after event i (−1)
	allocs := make([]int, 0, len(ev)/2)
	for i := range ev {
		if ev[i].Action == snapshot.ActionAlloc {
			allocs = append(allocs, i)
		}
	}
	around := func(i int) (prev, next int) {
		k := sort.SearchInts(allocs, i)
		prev, next = -1, -1
		if k > 0 {
			prev = allocs[k-1]
		}
		if k+1 < len(allocs) {
			next = allocs[k+1]
		}
		return prev, next
	}
	isCand := map[int]bool{}
	strong := map[int]bool{}
	for _, i := range allocs {
		bi := h.OpenAt(i)
		if bi < 0 {
			continue
		}
		b := &h.Blocks[bi]
		if b.Untracked || b.Category == result.Parameter || b.Category == result.Workspace || weightOf(b) == 0 {
			continue
		}
		m := h.Markers.Get(b.Stack)
		c := h.Phases.Code[i]
		if m.init || c != codeForward && !(m.autocastCast && c != codeOptimizer) && !(m.recompute && c == CodeBackward) {
			continue // C++ frames alone may not show forward; autocast's cast does
		}
		if m.autocastCast {
			if !m.castInAttention {
				isCand[int(bi)], strong[int(bi)] = true, true
			}
			continue
		}
		if m.Hint < HintUser || m.fusedAttention || m.SdpaMath { // no Python frames: nothing tells a copy apart; attention kernels cast no weight
			continue
		}
		prev, next := around(i)
		if (next < 0 || ev[next].Stack != ev[i].Stack) && !(m.recompute && c == CodeBackward) {
			// the op's output follows its casts (in a recomputed forward
			// the autograd engine's own work may come between)
			continue
		}
		if prev >= 0 && ev[prev].Stack == ev[i].Stack && !isCand[int(h.OpenAt(prev))] {
			continue // the op's second allocation (its output came first)
		}
		isCand[int(bi)] = true
	}
	if len(strong) > 0 {
		// C++ frames show every cast autocast makes: an allocation whose
		// frames do not is no copy, whatever its size and Python stack.
		for bi := range isCand {
			if !strong[bi] {
				delete(isCand, bi)
			}
		}
	}
	if len(isCand) == 0 {
		return
	}
	// Lifetimes: live to the end (or the OOM), freed by autocast's exit, or
	// freed in a burst with other copies.
	var frees []int
	for bi := range isCand {
		b := &h.Blocks[bi]
		if b.Free >= 0 && !(h.FirstOOM >= 0 && int(b.Alloc) < h.FirstOOM && int(b.Free) > h.FirstOOM) {
			frees = append(frees, int(b.Free))
		}
	}
	sort.Ints(frees)
	inBurst := map[int]bool{}
	for k := 0; k < len(frees); {
		j := k
		for j+1 < len(frees) && !allocBetween(allocs, frees[j], frees[j+1]) {
			j++
		}
		if j > k {
			for x := k; x <= j; x++ {
				inBurst[frees[x]] = true
			}
		}
		k = j + 1
	}
	// Python frames alone say only "the first allocation of an op, half a
	// weight's size": an fp32 run's activations saved for backward look the
	// same (two nn.Linear of an nn.Sequential share one stack). Freed in
	// backward, they are copies only where the run shows autocast at work —
	// its frames name it (torch/amp/autocast_mode.py, at::autocast), a cast
	// is autocast's by its C++ frames or trace ops, copies leave in one
	// burst (the region's exit), or backward casts the gradients of the
	// copies to fp32 (castsGradients).
	evidence := len(strong) > 0 || len(inBurst) > 0 || autocastInFrames(h.Snap) || castsGradients(h)
	ok := map[int]bool{}
	for bi := range isCand {
		b := &h.Blocks[bi]
		switch {
		case b.Free < 0, h.FirstOOM >= 0 && int(b.Alloc) < h.FirstOOM && int(b.Free) > h.FirstOOM:
			ok[bi] = true
		case h.Markers.Get(b.FreeStack).autocastExit, inBurst[int(b.Free)]:
			ok[bi] = true
		case h.Phases.Code[b.Free] == CodeBackward && (evidence || strong[bi]) && (h.Phases.Code[b.Alloc] != CodeBackward || strong[bi] || h.Markers.Get(b.Stack).recompute):
			ok[bi] = true // saved for backward by the graph (a recomputed forward's too), freed with it
		}
	}
	// Per size: copies live at once never outnumber the weights.
	sizes := map[int64]bool{} // of the weights copied
	for bi := range ok {
		sizes[weightOf(&h.Blocks[bi])] = true
	}
	mostLive := func(size int64) int { // copies of a weight of size live at once
		type delta struct{ at, d int }
		var ds []delta
		for bi := range ok {
			if b := &h.Blocks[bi]; weightOf(b) == size {
				ds = append(ds, delta{int(b.Alloc), 1})
				if b.Free >= 0 {
					ds = append(ds, delta{int(b.Free), -1})
				}
			}
		}
		sort.Slice(ds, func(a, b int) bool { return ds[a].at < ds[b].at })
		live, most := 0, 0
		for _, d := range ds {
			live += d.d
			most = max(most, live)
		}
		return most
	}
	for size := range sizes {
		most := mostLive(size)
		if most > params[size] {
			// More copies of this size than weights: some casts are of
			// activations (an fp32 input cast for the op, of the same size
			// by coincidence). An op casts its arguments in order, and the
			// input comes before the weight (F.linear, matmul, einsum,
			// conv): drop the first cast of each op that casts more than
			// one tensor, and count again.
			for bi := range ok {
				b := &h.Blocks[bi]
				if _, next := around(int(b.Alloc)); weightOf(b) == size && next >= 0 && ev[next].Stack == ev[b.Alloc].Stack && isCand[int(h.OpenAt(next))] {
					delete(ok, bi)
				}
			}
			most = mostLive(size)
		}
		if most > params[size] {
			continue
		}
		for bi := range ok {
			b := &h.Blocks[bi]
			if weightOf(b) != size {
				continue
			}
			conf := result.Medium
			if strong[bi] || b.Free >= 0 && h.Markers.Get(b.FreeStack).autocastExit {
				conf = result.High
			}
			b.classify(result.AutocastCache, RuleAutocastWeightCache, conf)
		}
	}
}

// allocBetween reports whether an allocation event lies strictly between
// events a and b (allocs sorted).
func allocBetween(allocs []int, a, b int) bool {
	k := sort.SearchInts(allocs, a+1)
	return k < len(allocs) && allocs[k] < b
}

// AutocastDiagnostic says how much autocast's weight cache holds (the most
// it held at once, and at the peak) and what removes it.
func AutocastDiagnostic(h *History, peak int) (result.Diagnostic, bool) {
	type delta struct {
		at   int
		size int64
	}
	var ds []delta
	var atPeak int64
	n := 0
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.Rule() != RuleAutocastWeightCache {
			continue
		}
		ds = append(ds, delta{int(b.Alloc), b.Size})
		if b.Free >= 0 {
			ds = append(ds, delta{int(b.Free), -b.Size})
		}
		if b.LiveAt(peak) {
			atPeak += b.Size
			n++
		}
	}
	if len(ds) == 0 {
		return result.Diagnostic{}, false
	}
	sort.Slice(ds, func(a, b int) bool { return ds[a].at < ds[b].at || ds[a].at == ds[b].at && ds[a].size < ds[b].size })
	var live, most int64
	for _, d := range ds {
		live += d.size
		most = max(most, live)
	}
	id := h.Device.ID
	held := fmt.Sprintf("up to %s", units.FormatBytes(most))
	if atPeak > 0 {
		held += fmt.Sprintf(" (%s at the peak, %d copies)", units.FormatBytes(atPeak), n)
	}
	return result.Diagnostic{Kind: "autocast_weight_cache", Device: id, Message: fmt.Sprintf(
		"device %d: autocast's weight cache holds %s: 16-bit copies of fp32 weights, made at each weight's first use under torch.autocast and kept until the autocast region exits (or, saved for backward, until backward); they are autocast_cache, not parameters, activations or a leak; torch.autocast(..., cache_enabled=False) or keeping the weights in bf16 (model.to(torch.bfloat16)) removes them",
		id, held)}, true
}

// backwardPasses is how many backward passes a chrome trace records (its
// backward annotations, else its optimizer steps; at least 1): each makes
// one AccumulateGrad per trained weight.
func (h *History) backwardPasses() int {
	var bw, opt int
	for _, a := range h.Snap.Annotations {
		switch a.Kind {
		case snapshot.AnnotationBackward:
			bw++
		case snapshot.AnnotationOptStep:
			opt++
		}
	}
	switch {
	case bw > 0:
		return bw
	case opt > 0:
		return opt
	}
	return 1
}

// autocastInFrames reports whether any frame of the snapshot is autocast's
// (torch/amp/autocast_mode.py, torch.cuda.amp, at::autocast's C++ frames).
func autocastInFrames(s *snapshot.Snapshot) bool {
	for i := range s.Frames {
		f := &s.Frames[i]
		if strings.Contains(f.Filename, "autocast") || strings.Contains(f.Name, "autocast") {
			return true
		}
	}
	return false
}

// castsGradients reports whether backward casts weight gradients to fp32,
// as it does under autocast: a matmul's backward makes the gradient of the
// weight's 16-bit copy (half the weight's bytes), the copy's
// ToCopyBackward0 casts it to the fp32 gradient, and the autograd engine
// frees the 16-bit one at once. So a gradient allocated in backward whose
// next free (before any other allocation) ends a block of exactly half its
// bytes, made earlier in backward, was cast; an fp32 or a pure 16-bit run
// computes its gradients in their own dtype and casts none. It takes at
// least half of the bytes of the gradients made in backward (the weights
// autocast casts — linear and convolution weights — hold most of a model's
// bytes) so that an isolated coincidence of sizes proves nothing.
func castsGradients(h *History) bool {
	ev := h.Device.Events
	var grads, cast int64
	for bi := range h.Blocks {
		g := &h.Blocks[bi]
		if g.Category != result.Gradient || g.Alloc < 0 || h.Phases.Code[g.Alloc] != CodeBackward || g.Requested <= 0 {
			continue
		}
		grads += g.Requested
		for j := int(g.Alloc) + 1; j < len(ev) && ev[j].Action != snapshot.ActionAlloc; j++ {
			if e := h.EndAt(j); e >= 0 {
				c := &h.Blocks[e]
				if 2*c.Requested == g.Requested && c.Alloc >= 0 && c.Alloc < g.Alloc && h.Phases.Code[c.Alloc] == CodeBackward {
					cast += g.Requested
				}
				break
			}
		}
	}
	return grads > 0 && 2*cast >= grads
}
