package result

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
