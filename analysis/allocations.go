package analysis

import "sort"

// Allocation is one block around a moment, with its stack: what a user of
// PyTorch's memory_viz hovers an allocation for.
type Allocation struct {
	Address   uint64
	Size      int64 // the allocator's block
	Requested int64 // what the program asked for
	Category  Category
	Rule      string
	// Phase and Step are those of the allocation (PhaseBeforeRecording for
	// a block older than the trace); AllocEvent is its event (−1 then).
	Phase      Phase
	Step       int
	AllocEvent int
	AllocUS    int64
	// FreeEvent is the event that freed it, −1 when it is live at the end.
	FreeEvent int
	Site      string
	// Stack is the allocation's stack, innermost first (the Python frames,
	// else the C++ ones without the allocator's plumbing).
	Stack []string
}

// AllocationsAt lists single allocations around one moment (event Event):
// the largest live after it and the last ones allocated up to it.
type AllocationsAt struct {
	Event   int
	Live    int // blocks live after the event
	Largest []Allocation
	Recent  []Allocation
}

// Bounds of AllocationsAt: the largest live blocks and the latest
// allocations listed, and the frames of each stack.
const (
	allocationsLargest = 25
	allocationsRecent  = 15
	allocationFrames   = 16
)

// allocationsAt lists the largest blocks live after event i and the last
// allocations up to it (nil when the device has no blocks then).
func (h *History) allocationsAt(sites *siteCache, i int) *AllocationsAt {
	at := &AllocationsAt{Event: i}
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
		at.Largest = append(at.Largest, h.allocation(sites, bi))
	}
	for k := i; k >= 0 && len(at.Recent) < allocationsRecent; k-- {
		if bi := h.openAt(k); bi >= 0 && !h.Blocks[bi].Untracked {
			at.Recent = append(at.Recent, h.allocation(sites, int(bi)))
		}
	}
	return at
}

func (h *History) allocation(sites *siteCache, bi int) Allocation {
	b := &h.Blocks[bi]
	a := Allocation{Address: b.Addr, Size: b.Size, Requested: b.Requested, Category: b.Category, Rule: b.Rule,
		AllocEvent: b.Alloc, FreeEvent: b.Free, Site: h.blockSite(sites, b), Stack: h.displayStack(b.Stack, allocationFrames)}
	if b.Alloc < 0 {
		a.Phase, a.AllocEvent = PhaseBeforeRecording, -1
	} else {
		a.Phase, a.Step, a.AllocUS = h.Phases.At(b.Alloc), h.Phases.StepAt(b.Alloc), h.TimeUS(b.Alloc)
	}
	return a
}
