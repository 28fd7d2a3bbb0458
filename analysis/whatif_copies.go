package analysis

import (
	"sort"

	"github.com/torchmem/torchmem/snapshot"
)

// weightCopies marks, for projections, the blocks that are 16-bit copies of
// fp32 weights made by torch.autocast (or by any cast of a weight for a
// matmul): their size is the weight's, not the batch's or the sequence's,
// so a projection keeps them as they are, whatever category the
// classification gave them (autocast frees them in backward, where the
// categories take what backward frees for activations).
//
// A copy is what the cast before a matmul allocates: under autocast an op
// casts its weight first (cached_cast, C++ frames), then its fp32 input,
// then makes its output, all at the op's stack. So a copy is the first
// allocation of a run of allocations at one stack in forward, of exactly
// half the bytes an fp32 parameter requested; with C++ frames, any block
// cached_cast made. As in the autocast classification, a size where more
// such blocks live at once than fp32 weights of twice the size exist is a
// coincidence of sizes (an activation as large as half a weight), and
// none of it is marked.
func (h *History) weightCopies() []bool {
	marked := make([]bool, len(h.Blocks))
	params := map[int64]int{}
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.Category == Parameter && b.Rule != RuleAutocastWeightCache && b.Requested > 0 && b.Requested%4 == 0 {
			params[b.Requested]++
		}
	}
	if len(params) == 0 {
		return marked
	}
	ev := h.Device.Events
	var cands []int32
	// consider decides on the allocation at event i, first of its run at
	// one stack or not, once the next allocation shows whether the run
	// goes on (followed).
	consider := func(i int, first, followed bool) {
		bi := h.openAt(i)
		b := &h.Blocks[bi]
		if b.Category == Parameter || b.Untracked || params[2*b.Requested] == 0 {
			return
		}
		m := h.markers.get(b.Stack)
		switch {
		case m.autocastCast:
			cands = append(cands, bi)
		case m.init || m.hint < hintUser || h.Phases.code[i] != codeForward:
		case first && followed:
			cands = append(cands, bi)
		}
	}
	prev, prevFirst := -1, false
	for i := range ev {
		if ev[i].Action != snapshot.ActionAlloc || h.openAt(i) < 0 {
			continue
		}
		first := prev < 0 || ev[prev].Stack != ev[i].Stack
		if prev >= 0 {
			consider(prev, prevFirst, !first)
		}
		prev, prevFirst = i, first
	}
	if prev >= 0 {
		consider(prev, prevFirst, false)
	}
	// Per size: never more live at once than weights of twice the size.
	type delta struct{ at, d int }
	bySize := map[int64][]delta{}
	for _, bi := range cands {
		b := &h.Blocks[bi]
		bySize[b.Requested] = append(bySize[b.Requested], delta{b.Alloc, 1})
		if end := b.allocEnd(); end >= 0 {
			bySize[b.Requested] = append(bySize[b.Requested], delta{end, -1})
		}
	}
	ok := map[int64]bool{}
	for size, ds := range bySize {
		sort.Slice(ds, func(a, b int) bool { return ds[a].at < ds[b].at || ds[a].at == ds[b].at && ds[a].d < ds[b].d })
		live, most := 0, 0
		for _, d := range ds {
			live += d.d
			most = max(most, live)
		}
		ok[size] = most <= params[2*size]
	}
	for _, bi := range cands {
		marked[bi] = ok[h.Blocks[bi].Requested]
	}
	return marked
}
