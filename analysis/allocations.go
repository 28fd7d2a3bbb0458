package analysis

import (
	"sort"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/result"
)

// Bounds of AllocationsAt: the largest live blocks and the latest
// allocations listed, and the frames of each stack.
const (
	allocationsLargest = 25
	allocationsRecent  = 15
	allocationFrames   = 16
)

// allocationsAt lists the largest blocks live after event i and the last
// allocations up to it (nil when the device has no blocks then).
func allocationsAt(h *history.History, sites *history.SiteCache, i int) *result.AllocationsAt {
	at := &result.AllocationsAt{Event: i}
	var live []int
	for bi, b := range h.LiveBlocks(i) {
		if !b.Untracked {
			live = append(live, bi)
		}
	}
	at.Live = len(live)
	if at.Live == 0 {
		return nil
	}
	sort.SliceStable(live, func(a, b int) bool { return h.Blocks[live[a]].Size > h.Blocks[live[b]].Size })
	for _, bi := range live[:min(len(live), allocationsLargest)] {
		at.Largest = append(at.Largest, allocation(h, sites, bi))
	}
	for k := i; k >= 0 && len(at.Recent) < allocationsRecent; k-- {
		if bi := h.OpenAt(k); bi >= 0 && !h.Blocks[bi].Untracked {
			at.Recent = append(at.Recent, allocation(h, sites, int(bi)))
		}
	}
	return at
}

func allocation(h *history.History, sites *history.SiteCache, bi int) result.Allocation {
	b := &h.Blocks[bi]
	a := result.Allocation{Address: b.Addr, Size: b.Size, Requested: b.Requested, Category: b.Category, Rule: b.Rule(),
		AllocEvent: int(b.Alloc), FreeEvent: int(b.Free), Site: h.BlockSite(sites, b), Stack: h.DisplayStack(b.Stack, allocationFrames)}
	if b.Alloc < 0 {
		a.Phase, a.AllocEvent = result.PhaseBeforeRecording, -1
	} else {
		a.Phase, a.Step, a.AllocUS = h.Phases.At(int(b.Alloc)), h.Phases.StepAt(int(b.Alloc)), h.TimeUS(int(b.Alloc))
	}
	return a
}
