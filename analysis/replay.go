package analysis

import (
	"fmt"
	"iter"
	"strings"

	"github.com/torchmem/torchmem/snapshot"
)

// Block is one allocation's lifetime on a device, as the replay found it.
type Block struct {
	Addr uint64
	// Size is the allocation in the units of the trace: the requested bytes
	// of a snapshot, the allocator block size of a chrome trace.
	Size int64
	// Rounded is the allocator-owned block size: the segment block's size
	// when the block is live at the dump, else Size rounded up to 512 bytes
	// plus the rest of the free block the allocator did not split off
	// (unsplitRests).
	Rounded int64
	// Alloc is the event index of the allocation, or −1 when the block was
	// allocated before the recording began.
	Alloc int
	// Free is the event index of free_completed, or −1 when the block is
	// live at the end.
	Free int
	// FreeRequested is the event index of free_requested, or −1.
	FreeRequested int
	// Stack is the allocation stack (the trace entry's, or the dump-time
	// block's for blocks allocated before recording); FreeStack the free's.
	Stack, FreeStack snapshot.StackID
	// Untracked marks the part of a chrome trace's pre-window baseline that
	// no event accounts for (a pseudo-block at address 0).
	Untracked bool
	// Category, Rule and Confidence are set by classification.
	Category   Category
	Rule       string
	Confidence Confidence

	meta uint32 // Event.Meta of the allocation (memory timelines: "category:…")
}

// LiveAt reports whether the block is allocated after event i (i = −1: at
// the start of the trace).
func (b *Block) LiveAt(i int) bool {
	return b.Alloc <= i && (b.Free < 0 || b.Free > i)
}

// History is the replayed history of one device: every block's lifetime,
// the allocated and reserved curves, and the phases and steps of every
// event. It is what every pass (and leak detection) works from.
type History struct {
	Snap   *snapshot.Snapshot
	Device *snapshot.Device
	Blocks []Block
	// InitialAllocated and InitialReserved are the bytes before the first
	// event (memory allocated or reserved before recording began).
	InitialAllocated, InitialReserved int64
	// Allocated[i] and Reserved[i] are the bytes after event i.
	Allocated, Reserved []int64
	// Phases holds the phase and step of every event and the phase spans.
	Phases *Phases
	// Steps is how the events divide into steps (the step pass).
	Steps *StepPlan

	// openAt[i] / closeAt[i] are the blocks event i allocates / frees (−1).
	openAt, closeAt []int32
	// extraClose lists blocks closed by an event that also opens one
	// (an alloc at an address still live: a lost free).
	extraClose map[int]int32
	markers    *stackMemo[stackMarkers]
	diags      []Diagnostic
	// firstOOM is the index of the first oom event (−1).
	firstOOM int
	// replay facts for diagnostics
	preFreed, preLive           int
	preFreedBytes, preLiveBytes int64
	liveNotInDump               int
	reuse                       int
	anonymous                   int // allocations without an address, paired by size
	reservedClamped             bool
}

// NumEvents is the number of trace events of the device.
func (h *History) NumEvents() int { return len(h.Device.Events) }

// TimeUS returns event i's time in microseconds, 0 when it has none.
func (h *History) TimeUS(i int) int64 {
	if i < 0 || i >= len(h.Device.Events) {
		if i < 0 && len(h.Device.Events) > 0 {
			i = 0
		} else {
			return 0
		}
	}
	e := &h.Device.Events[i]
	if !e.HasTime() {
		return 0
	}
	return e.TimeNS / 1000
}

// AllocatedAt returns the allocated bytes after event i (i = −1: initial).
func (h *History) AllocatedAt(i int) int64 {
	if i < 0 || len(h.Allocated) == 0 {
		return h.InitialAllocated
	}
	return h.Allocated[i]
}

// ReservedAt returns the reserved bytes after event i (i = −1: initial).
func (h *History) ReservedAt(i int) int64 {
	if i < 0 || len(h.Reserved) == 0 {
		return h.InitialReserved
	}
	return h.Reserved[i]
}

// EndIndex is the index of the last event (−1 when there are none).
func (h *History) EndIndex() int { return len(h.Device.Events) - 1 }

// roundUp512 rounds a request the way the caching allocator does (512 B).
func roundUp512(n int64) int64 {
	if n <= 0 {
		return 512
	}
	return (n + 511) / 512 * 512
}

// Replay builds the History of one device: it pairs allocations with frees,
// reconstructs the blocks that were allocated before recording began (frees
// without an allocation, and blocks live at the dump that the trace never
// allocated — MemoryViz's "initially allocated" blocks), and computes the
// allocated and reserved curves, the reserved curve by replaying segment
// events backwards from the dump-time segments. Phases are left to
// ComputePhases.
func Replay(s *snapshot.Snapshot, d *snapshot.Device) *History {
	h := &History{Snap: s, Device: d, markers: newStackMemo(s, markersOf), firstOOM: -1}
	n := len(d.Events)
	h.openAt = make([]int32, n)
	h.closeAt = make([]int32, n)
	for i := range h.openAt {
		h.openAt[i], h.closeAt[i] = -1, -1
	}
	// Size the block table for the usual case: every allocation and every
	// block live at the dump makes a block, frees without an allocation
	// (blocks allocated before recording began) are few and grow the table.
	// Counting allocations and frees both would reserve twice the memory.
	allocs, frees := 0, 0
	for i := range d.Events {
		switch d.Events[i].Action {
		case snapshot.ActionAlloc:
			allocs++
		case snapshot.ActionFreeCompleted:
			frees++
		}
	}
	blocks := allocs + max(0, frees-allocs)
	for gi := range d.Segments {
		blocks += len(d.Segments[gi].Blocks)
	}
	h.Blocks = make([]Block, 0, blocks+1)
	live := make(map[uint64]int32, 1024)
	type anonKey struct {
		size int64
		meta uint32
	}
	anon := map[anonKey][]int32{}
	newBlock := func(b Block) int32 {
		h.Blocks = append(h.Blocks, b)
		return int32(len(h.Blocks) - 1)
	}
	for i := range d.Events {
		e := &d.Events[i]
		switch e.Action {
		case snapshot.ActionOOM:
			if h.firstOOM < 0 {
				h.firstOOM = i
			}
		case snapshot.ActionAlloc:
			if e.Addr == 0 {
				// No address (bytes-only traces, memory timelines): pair
				// with the latest free of the same size and metadata.
				bi := newBlock(Block{Size: e.Size, Rounded: e.Size, Alloc: i, Free: -1, FreeRequested: -1, Stack: e.Stack, meta: e.Meta})
				k := anonKey{e.Size, h.categoryMeta(e.Meta)}
				anon[k] = append(anon[k], bi)
				h.openAt[i] = bi
				h.anonymous++
				continue
			}
			if old, ok := live[e.Addr]; ok {
				h.Blocks[old].Free = i
				if h.extraClose == nil {
					h.extraClose = map[int]int32{}
				}
				h.extraClose[i] = old
				h.reuse++
			}
			bi := newBlock(Block{Addr: e.Addr, Size: e.Size, Rounded: roundUp512(e.Size), Alloc: i, Free: -1, FreeRequested: -1, Stack: e.Stack})
			live[e.Addr] = bi
			h.openAt[i] = bi
		case snapshot.ActionFreeRequested:
			bi, ok := live[e.Addr]
			if !ok {
				bi = newBlock(Block{Addr: e.Addr, Size: e.Size, Rounded: roundUp512(e.Size), Alloc: -1, Free: -1, FreeRequested: -1})
				live[e.Addr] = bi
				h.preFreed++
				h.preFreedBytes += e.Size
			}
			h.Blocks[bi].FreeRequested = i
			h.Blocks[bi].FreeStack = e.Stack
		case snapshot.ActionFreeCompleted:
			if e.Addr == 0 {
				k := anonKey{e.Size, h.categoryMeta(e.Meta)}
				var bi int32
				if st := anon[k]; len(st) > 0 {
					bi = st[len(st)-1]
					anon[k] = st[:len(st)-1]
				} else {
					bi = newBlock(Block{Size: e.Size, Rounded: e.Size, Alloc: -1, Free: -1, FreeRequested: -1, FreeStack: e.Stack, meta: e.Meta})
					h.preFreed++
					h.preFreedBytes += e.Size
				}
				h.Blocks[bi].Free = i
				h.closeAt[i] = bi
				continue
			}
			bi, ok := live[e.Addr]
			if !ok {
				bi = newBlock(Block{Addr: e.Addr, Size: e.Size, Rounded: roundUp512(e.Size), Alloc: -1, Free: -1, FreeRequested: -1, FreeStack: e.Stack})
				h.preFreed++
				h.preFreedBytes += e.Size
			}
			delete(live, e.Addr)
			h.Blocks[bi].Free = i
			if h.Blocks[bi].FreeStack == 0 {
				h.Blocks[bi].FreeStack = e.Stack
			}
			h.closeAt[i] = bi
		}
	}
	// Blocks live at the dump: match them with the trace; the others were
	// allocated before recording began and never freed.
	if len(d.Segments) > 0 {
		seen := make(map[uint64]bool, len(live))
		for gi := range d.Segments {
			g := &d.Segments[gi]
			for bi := range g.Blocks {
				b := &g.Blocks[bi]
				if b.State != snapshot.BlockActiveAllocated && b.State != snapshot.BlockActivePendingFree {
					continue
				}
				if idx, ok := live[b.Address]; ok {
					h.Blocks[idx].Rounded = b.Size
					if h.Blocks[idx].Stack == 0 {
						h.Blocks[idx].Stack = b.Stack
					}
					seen[b.Address] = true
					continue
				}
				size := b.RequestedSize
				if size <= 0 {
					size = b.Size
				}
				newBlock(Block{Addr: b.Address, Size: size, Rounded: b.Size, Alloc: -1, Free: -1, FreeRequested: -1, Stack: b.Stack})
				h.preLive++
				h.preLiveBytes += size
			}
		}
		for addr := range live {
			if !seen[addr] {
				h.liveNotInDump++
			}
		}
	}
	// Initial allocated: every block allocated before the first event.
	for i := range h.Blocks {
		if h.Blocks[i].Alloc < 0 {
			h.InitialAllocated += h.Blocks[i].Size
		}
	}
	// Chrome traces state the pre-window baseline (Total Allocated − Bytes
	// of the first event); what no orphan free explains is untracked.
	if d.Baseline >= 0 && len(d.Segments) == 0 {
		if rest := d.Baseline - h.InitialAllocated; rest > 0 {
			newBlock(Block{Size: rest, Rounded: rest, Alloc: -1, Free: -1, FreeRequested: -1, Untracked: true})
			h.InitialAllocated = d.Baseline
		}
	}
	h.Allocated = make([]int64, n)
	cur := h.InitialAllocated
	for i := range d.Events {
		if bi := h.openAt[i]; bi >= 0 {
			cur += h.Blocks[bi].Size
		}
		if bi := h.closeAt[i]; bi >= 0 {
			cur -= h.Blocks[bi].Size
		}
		if bi, ok := h.extraClose[i]; ok {
			cur -= h.Blocks[bi].Size
		}
		h.Allocated[i] = cur
	}
	h.replayReserved()
	h.fitUnsplitRests()
	return h
}

// replayReserved computes the reserved curve: from the chrome trace's
// Total Reserved counter, or by undoing segment events from the dump-time
// segments (reserved before = reserved after − allocated/mapped + freed/
// unmapped).
func (h *History) replayReserved() {
	d := h.Device
	n := len(d.Events)
	h.Reserved = make([]int64, n)
	if len(d.Reserved) > 0 {
		pi := 0
		cur := d.Reserved[0].Value
		h.InitialReserved = cur
		for i := 0; i < n; i++ {
			for pi < len(d.Reserved) && d.Reserved[pi].Event <= i {
				cur = d.Reserved[pi].Value
				pi++
			}
			h.Reserved[i] = cur
		}
		return
	}
	var end int64
	for gi := range d.Segments {
		end += d.Segments[gi].TotalSize
	}
	var sum int64
	delta := func(e *snapshot.Event) int64 {
		switch e.Action {
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
			return e.Size
		case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
			return -e.Size
		}
		return 0
	}
	for i := range d.Events {
		sum += delta(&d.Events[i])
	}
	start := end - sum
	cur, low := start, start
	for i := range d.Events {
		cur += delta(&d.Events[i])
		low = min(low, cur)
	}
	if low < 0 {
		// The dump lacks segments the trace created (or a ring overflow
		// lost a segment_free): shift so that the curve never goes below 0.
		start -= low
		h.reservedClamped = true
	}
	h.InitialReserved = start
	cur = start
	for i := range d.Events {
		cur += delta(&d.Events[i])
		h.Reserved[i] = cur
	}
}

// LiveBlocks yields the index and the block of every block live after
// event i (i = −1: at the start of the trace), in block order.
func (h *History) LiveBlocks(i int) iter.Seq2[int, *Block] {
	return func(yield func(int, *Block) bool) {
		for bi := range h.Blocks {
			if b := &h.Blocks[bi]; b.LiveAt(i) && !yield(bi, b) {
				return
			}
		}
	}
}

// replayDiagnostics says what the replay found that limits trust.
func (h *History) replayDiagnostics() []Diagnostic {
	id := h.Device.ID
	var out []Diagnostic
	if h.preFreed > 0 {
		out = append(out, Diagnostic{Kind: "trace_starts_mid_run", Device: id, Message: fmt.Sprintf(
			"device %d: %d blocks (%s) were freed without an allocation in the trace: they were allocated before recording began (or the ring buffer dropped their allocation); their categories come from when they were freed", id, h.preFreed, FormatBytes(h.preFreedBytes))})
	}
	if h.preLive > 0 && len(h.Device.Events) > 0 {
		out = append(out, Diagnostic{Kind: "blocks_without_history", Device: id, Message: fmt.Sprintf(
			"device %d: %d blocks (%s) live at the dump have no allocation in the trace: they were allocated before recording began; their categories come from sizes, frames and lifetimes (lower confidence)", id, h.preLive, FormatBytes(h.preLiveBytes))})
	}
	if h.liveNotInDump > 0 {
		out = append(out, Diagnostic{Kind: "replay_mismatch", Device: id, Message: fmt.Sprintf(
			"device %d: %d blocks the trace leaves allocated are not active in the dump-time segments: the trace and the segments disagree (a lost free?); the curves follow the trace", id, h.liveNotInDump)})
	}
	if h.anonymous > 0 {
		out = append(out, Diagnostic{Kind: "paired_by_size", Device: id, Message: fmt.Sprintf(
			"device %d: %d allocations carry no address: each free was paired with the latest allocation of the same size, so the curve is exact but lifetimes, and the categories that rest on them, are guesses", id, h.anonymous)})
	}
	if h.reuse > 0 {
		out = append(out, Diagnostic{Kind: "address_reuse", Device: id, Message: fmt.Sprintf(
			"device %d: %d allocations at an address that was still allocated: a free is missing from the trace", id, h.reuse)})
	}
	if h.reservedClamped {
		out = append(out, Diagnostic{Kind: "reserved_inconsistent", Device: id, Message: fmt.Sprintf(
			"device %d: the segment events do not add up to the dump-time segments; the reserved curve was shifted to stay non-negative and is approximate", id)})
	}
	return out
}

// categoryMeta returns m when it is a memory timeline's "category:…"
// metadata (allocations pair only within a category), else 0 (an op name
// says nothing about which allocation a free ends).
func (h *History) categoryMeta(m uint32) uint32 {
	if m != 0 && int(m) < len(h.Snap.Strings) && strings.HasPrefix(h.Snap.Strings[m], "category:") {
		return m
	}
	return 0
}
