package history

import (
	"fmt"
	"iter"
	"strings"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// Block is one allocation's lifetime on a device, as the replay found it.
type Block struct {
	Addr uint64
	// Size is the allocator's block in bytes, PyTorch's unit: what
	// torch.cuda.memory_allocated(), a dump's allocated_size and a chrome
	// trace's Bytes count. For a snapshot it is the dump's block size when
	// the block is live at the dump, else the request sized by the
	// allocator's rules (sizeBlocks).
	Size int64
	// Requested is the size the program asked for (a snapshot's trace entry
	// or the dump's requested_size); a chrome trace has none, and Requested
	// is Size there.
	Requested int64
	// Alloc is the event index of the allocation, or −1 when the block was
	// allocated before the recording began. (The event indexes are int32,
	// as the history's block index's are: a device of 2³¹ events would
	// hold some 90 GB of events, far past any input the readers accept.)
	Alloc int32
	// Free is the event index of free_completed, or −1 when the block is
	// live at the end.
	Free int32
	// FreeRequested is the event index of free_requested, or −1. The
	// allocation ends there (PyTorch stops counting the block as allocated);
	// the block stays active, its memory held, until Free.
	FreeRequested int32
	// Stack is the allocation stack (the trace entry's, or the dump-time
	// block's for blocks allocated before recording); FreeStack the free's.
	Stack, FreeStack snapshot.StackID

	// Untracked marks the part of a chrome trace's pre-window baseline that
	// no event accounts for (a pseudo-block at address 0).
	Untracked bool
	// PendingAtStart marks a block the dump shows freed but waiting on
	// other streams (active_pending_free) that the trace never touches: it
	// holds memory but is not allocated at any event.
	PendingAtStart bool
	// Category is set by classification, with the rule and confidence
	// that decided it (Rule, Confidence: the verdict). (The fields are
	// ordered so that the small ones share a word, and a block is 48
	// bytes: a long trace has millions of blocks. The metadata of the few
	// files that record a category per allocation is History.metas.)
	Category result.Category
	verdict  verdictID
}

// AllocEnd is the event at which the block stops being allocated:
// free_requested, else free_completed (−1: allocated at the end).
func (b *Block) AllocEnd() int {
	if b.FreeRequested >= 0 {
		return int(b.FreeRequested)
	}
	return int(b.Free)
}

// LiveAt reports whether the block is allocated after event i (i = −1: at
// the start of the trace): allocated and not yet freed by the program.
func (b *Block) LiveAt(i int) bool {
	end := b.AllocEnd()
	return !b.PendingAtStart && int(b.Alloc) <= i && (end < 0 || end > i)
}

// ActiveAt reports whether the block holds its memory after event i: from
// its allocation to free_completed (a freed block waiting on other streams
// is active, not allocated).
func (b *Block) ActiveAt(i int) bool {
	return int(b.Alloc) <= i && (b.Free < 0 || int(b.Free) > i)
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
	// InitialRequested is the requested bytes of the blocks allocated
	// before the first event.
	InitialRequested int64
	// Phases holds the phase and step of every event and the phase spans.
	Phases *Phases
	// Steps is how the events divide into steps (the step pass).
	Steps *StepPlan

	// Texts are the frames' texts of the file, shared by its devices (set
	// by analyze; made on first use for a history built alone).
	Texts *FrameTexts

	// blockAt tells the block event i allocates, or whose free it
	// requests or completes: see OpenAt, EndAt and CloseAt.
	blockAt *blockIndex
	// allocMarks[k] and reqMarks[k] are the allocated and requested bytes
	// before event k·curveMark: the curves between two marks are replayed
	// from the blocks (AllocatedAt, allocatedRange), so that the history
	// keeps a few bytes an event, not the curves.
	allocMarks, reqMarks []int64
	// resPoints are the reserved bytes from each event that changes them
	// (a snapshot's segment events; a chrome trace's Device.Reserved).
	resPoints []snapshot.CounterPoint
	// metas[bi] is block bi's "category:…" metadata (Event.Meta of its
	// allocation, or of its free or pre-existing row when it has none):
	// only memory timelines record one, so it is nil for other files, and
	// shorter than Blocks when the last blocks have none (blockMeta).
	metas []uint32
	// Sizing is what sizeBlocks found.
	Sizing blockSizing
	// extraClose lists blocks closed by an event that also opens one
	// (an alloc at an address still live: a lost free).
	extraClose map[int]int32
	// ann, when set, holds the snapshot's annotation intervals, computed
	// once for all its devices (Analyze shares it).
	ann     *AnnIntervals
	Markers *stackMemo[stackMarkers]
	Diags   []result.Diagnostic
	// FirstOOM is the index of the first oom event (−1).
	FirstOOM int
	// replay facts for diagnostics
	PreFreed, preLive           int
	preFreedBytes, preLiveBytes int64
	LiveNotInDump               int
	Reuse                       int
	Anonymous                   int // allocations without an address, paired by size
	ReservedClamped             bool
	// mapsSegments: an event maps or unmaps pages of an expandable
	// segment (found by the replay, read by Expandable).
	mapsSegments bool
	// peakEvent is the first event after which the most memory is
	// allocated, peakAllocated those bytes (found by the replay; −1 and
	// InitialAllocated when no event brings more than was allocated
	// before the first).
	peakEvent     int
	peakAllocated int64
}

// Peak is the first event after which the most memory is allocated (−1
// when no event brings more than was allocated before the first), and
// those bytes: the highest point of the allocated curve.
func (h *History) Peak() (event int, allocated int64) { return h.peakEvent, h.peakAllocated }

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

// hasRequests reports whether the file's sizes are requests that the
// allocator rounded into blocks (snapshots). A chrome trace's Bytes are the
// blocks themselves; a memory timeline (export_memory_timeline) has no
// allocator blocks, only the tensors' own sizes.
func hasRequests(s *snapshot.Snapshot) bool {
	switch s.Source.Format {
	case snapshot.FormatChromeTrace, snapshot.FormatMemoryTimeline:
		return false
	}
	return true
}

// requestedAt is RequestedAt for the result: nil when the file has no
// requested sizes besides its blocks.
func (h *History) RequestedOrNil(i int) *int64 {
	if !hasRequests(h.Snap) {
		return nil
	}
	v := h.RequestedAt(i)
	return &v
}

// EndIndex is the index of the last event (−1 when there are none).
func (h *History) EndIndex() int { return len(h.Device.Events) - 1 }

// Replay builds the History of one device: it pairs allocations with frees,
// reconstructs the blocks that were allocated before recording began (frees
// without an allocation, and blocks live at the dump that the trace never
// allocated — MemoryViz's "initially allocated" blocks), and computes the
// allocated and reserved curves, the reserved curve by replaying segment
// events backwards from the dump-time segments. Phases are left to
// ComputePhases.
func Replay(s *snapshot.Snapshot, d *snapshot.Device) *History {
	h := newHistory(s, d)
	h.replay()
	h.replayReserved()
	return h
}

// newHistory is the History of device d before its replay: the device and
// its stacks' markers (made on first use).
func newHistory(s *snapshot.Snapshot, d *snapshot.Device) *History {
	return &History{Snap: s, Device: d, Markers: NewStackMemo(s, StackUses(d), markersOf), FirstOOM: -1}
}

// replay is Replay on a new history but for the reserved curve
// (replayReserved). It reads the device and writes the blocks and the
// allocated curves; it does not use the markers or the reserved curve.
func (h *History) replay() {
	h.finishReplay(h.pairEvents())
}

// pairEvents is the first part of the replay: the blocks, from the events
// and the dump's segments. It returns which blocks the dump sized (nil
// when it has no segments), for finishReplay.
func (h *History) pairEvents() (dumped []bool) {
	d := h.Device
	n := len(d.Events)
	h.blockAt = newBlockIndex(n)
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
	newBlock := func(b Block, meta uint32) int32 {
		h.Blocks = append(h.Blocks, b)
		bi := int32(len(h.Blocks) - 1)
		h.setMeta(bi, meta)
		return bi
	}
	for i := range d.Events {
		if i > 0 && i%blockMark == 0 {
			h.blockAt.seal(i-1, len(h.Blocks))
		}
		e := &d.Events[i]
		switch e.Action {
		case snapshot.ActionSegmentMap, snapshot.ActionSegmentUnmap:
			h.mapsSegments = true
		case snapshot.ActionOOM:
			if h.FirstOOM < 0 {
				h.FirstOOM = i
			}
		case snapshot.ActionAlloc:
			if e.Addr == 0 {
				// No address (bytes-only traces, memory timelines): pair
				// with the latest free of the same size and metadata.
				bi := newBlock(Block{Size: e.Size, Requested: e.Size, Alloc: int32(i), Free: -1, FreeRequested: -1, Stack: e.Stack}, e.Meta)
				k := anonKey{e.Size, h.categoryMeta(e.Meta)}
				anon[k] = append(anon[k], bi)
				h.blockAt.set(i, bi)
				h.Anonymous++
				continue
			}
			if old, ok := live[e.Addr]; ok {
				h.Blocks[old].Free = int32(i)
				if h.extraClose == nil {
					h.extraClose = map[int]int32{}
				}
				h.extraClose[i] = old
				h.Reuse++
			}
			bi := newBlock(Block{Addr: e.Addr, Size: e.Size, Requested: e.Size, Alloc: int32(i), Free: -1, FreeRequested: -1, Stack: e.Stack}, 0)
			live[e.Addr] = bi
			h.blockAt.set(i, bi)
		case snapshot.ActionFreeRequested:
			bi, ok := live[e.Addr]
			if !ok {
				bi = newBlock(Block{Addr: e.Addr, Size: e.Size, Requested: e.Size, Alloc: -1, Free: -1, FreeRequested: -1}, 0)
				live[e.Addr] = bi
			}
			h.blockAt.set(i, bi)
			h.Blocks[bi].FreeRequested = int32(i)
			h.Blocks[bi].FreeStack = e.Stack
		case snapshot.ActionFreeCompleted:
			if e.Addr == 0 {
				k := anonKey{e.Size, h.categoryMeta(e.Meta)}
				var bi int32
				if st := anon[k]; len(st) > 0 {
					bi = st[len(st)-1]
					anon[k] = st[:len(st)-1]
				} else {
					bi = newBlock(Block{Size: e.Size, Requested: e.Size, Alloc: -1, Free: -1, FreeRequested: -1, FreeStack: e.Stack}, e.Meta)
				}
				h.Blocks[bi].Free = int32(i)
				h.blockAt.set(i, bi)
				continue
			}
			bi, ok := live[e.Addr]
			if !ok {
				bi = newBlock(Block{Addr: e.Addr, Size: e.Size, Requested: e.Size, Alloc: -1, Free: -1, FreeRequested: -1, FreeStack: e.Stack}, 0)
			}
			delete(live, e.Addr)
			h.Blocks[bi].Free = int32(i)
			if h.Blocks[bi].FreeStack == 0 {
				h.Blocks[bi].FreeStack = e.Stack
			}
			h.blockAt.set(i, bi)
		}
	}
	if n > 0 {
		h.blockAt.seal(n-1, len(h.Blocks))
	}
	if len(d.Preexisting) > 0 {
		h.placePreexisting(newBlock)
	}
	// Blocks live at the dump: match them with the trace (the dump sizes
	// them); the others were allocated before recording began and never
	// freed.
	if len(d.Segments) > 0 {
		dumped = make([]bool, len(h.Blocks), cap(h.Blocks))
		seen := make(map[uint64]bool, len(live))
		for gi := range d.Segments {
			g := &d.Segments[gi]
			for bi := range g.Blocks {
				b := &g.Blocks[bi]
				if b.State != snapshot.BlockActiveAllocated && b.State != snapshot.BlockActivePendingFree {
					continue
				}
				if idx, ok := live[b.Address]; ok {
					h.Blocks[idx].Size = b.Size
					dumped[idx] = true
					if h.Blocks[idx].Stack == 0 {
						h.Blocks[idx].Stack = b.Stack
					}
					seen[b.Address] = true
					continue
				}
				req := b.RequestedSize
				if req <= 0 {
					req = b.Size
				}
				newBlock(Block{Addr: b.Address, Size: b.Size, Requested: req, Alloc: -1, Free: -1, FreeRequested: -1, Stack: b.Stack,
					PendingAtStart: b.State == snapshot.BlockActivePendingFree}, 0)
				dumped = append(dumped, true)
				h.preLive++
			}
		}
		for addr := range live {
			if !seen[addr] {
				h.LiveNotInDump++
			}
		}
	}
	return dumped
}

// finishReplay is the rest of the replay: the blocks' sizes where the dump
// does not state them, the memory allocated before the first event and
// the allocated curve's marks. It writes the blocks' sizes and no other
// field of theirs, and adds a block only to a trace that states its
// baseline (addsBlocks).
func (h *History) finishReplay(dumped []bool) {
	s, d := h.Snap, h.Device
	n := len(d.Events)
	// A snapshot's trace holds requests: size the blocks the dump does not.
	if hasRequests(s) {
		if dumped == nil {
			dumped = make([]bool, len(h.Blocks))
		}
		h.sizeBlocks(dumped)
	}
	// Initial allocated: every block allocated before the first event.
	for i := range h.Blocks {
		b := &h.Blocks[i]
		if b.Alloc >= 0 {
			continue
		}
		if b.LiveAt(-1) {
			h.InitialAllocated += b.Size
		}
		if b.Free >= 0 || b.FreeRequested >= 0 {
			h.PreFreed++
			h.preFreedBytes += b.Size
		} else if !b.Untracked {
			h.preLiveBytes += b.Size
		}
	}
	// Chrome traces state the pre-window baseline (Total Allocated − Bytes
	// of the first event); what no orphan free explains is untracked.
	if h.finishAddsBlocks() {
		if rest := d.Baseline - h.InitialAllocated; rest > 0 {
			h.Blocks = append(h.Blocks, Block{Size: rest, Requested: rest, Alloc: -1, Free: -1, FreeRequested: -1, Untracked: true})
			h.InitialAllocated = d.Baseline
		}
	}
	req := int64(0)
	for bi := range h.Blocks {
		if b := &h.Blocks[bi]; b.LiveAt(-1) {
			req += b.Requested
		}
	}
	h.InitialRequested = req
	h.allocMarks = make([]int64, 0, n/curveMark+2)
	h.reqMarks = make([]int64, 0, n/curveMark+2)
	cur := h.InitialAllocated
	h.peakEvent, h.peakAllocated = -1, cur
	for i := range d.Events {
		if i%curveMark == 0 {
			h.allocMarks = append(h.allocMarks, cur)
			h.reqMarks = append(h.reqMarks, req)
		}
		da, dr := h.DeltaAt(i)
		cur += da
		req += dr
		if cur > h.peakAllocated {
			h.peakEvent, h.peakAllocated = i, cur
		}
	}
	if n%curveMark == 0 { // the mark after the last event
		h.allocMarks = append(h.allocMarks, cur)
		h.reqMarks = append(h.reqMarks, req)
	}
}

// finishAddsBlocks reports whether finishReplay may add a block: the
// untracked rest of a trace's stated baseline.
func (h *History) finishAddsBlocks() bool {
	return h.Device.Baseline >= 0 && len(h.Device.Segments) == 0
}

// placePreexisting turns the allocations a file lists as older than its
// events into blocks that keep what the file says of them (a memory
// timeline's PREEXISTING rows and their categories): a free without an
// allocation ends one of them (of its size and category, else of its size),
// the others live on.
func (h *History) placePreexisting(newBlock func(Block, uint32) int32) {
	type key struct {
		size int64
		meta uint32
	}
	rows := h.Device.Preexisting
	used := make([]bool, len(rows))
	byKey := map[key][]int{}
	bySize := map[int64][]int{}
	for i, r := range rows {
		k := key{r.Size, h.categoryMeta(r.Meta)}
		byKey[k] = append(byKey[k], i)
		bySize[r.Size] = append(bySize[r.Size], i)
	}
	take := func(l []int) bool {
		for _, i := range l {
			if !used[i] {
				used[i] = true
				return true
			}
		}
		return false
	}
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.Alloc >= 0 || b.Addr != 0 || b.Untracked {
			continue
		}
		if !take(byKey[key{b.Size, h.blockMeta(bi)}]) {
			take(bySize[b.Size])
		}
	}
	for i, r := range rows {
		if !used[i] {
			newBlock(Block{Size: r.Size, Requested: r.Size, Alloc: -1, Free: -1, FreeRequested: -1}, r.Meta)
		}
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

// ReplayDiagnostics says what the replay found that limits trust.
func (h *History) ReplayDiagnostics() []result.Diagnostic {
	id := h.Device.ID
	var out []result.Diagnostic
	if h.PreFreed > 0 {
		out = append(out, result.Diagnostic{Kind: "trace_starts_mid_run", Device: id, Message: fmt.Sprintf(
			"device %d: %d blocks (%s) were freed without an allocation in the trace: they were allocated before recording began (or the ring buffer dropped their allocation); their categories come from when they were freed", id, h.PreFreed, units.FormatBytes(h.preFreedBytes))})
	}
	if h.preLive > 0 && len(h.Device.Events) > 0 {
		out = append(out, result.Diagnostic{Kind: "blocks_without_history", Device: id, Message: fmt.Sprintf(
			"device %d: %d blocks (%s) live at the dump have no allocation in the trace: they were allocated before recording began; their categories come from sizes, frames and lifetimes (lower confidence)", id, h.preLive, units.FormatBytes(h.preLiveBytes))})
	}
	if h.LiveNotInDump > 0 {
		out = append(out, result.Diagnostic{Kind: "replay_mismatch", Device: id, Message: fmt.Sprintf(
			"device %d: %d blocks the trace leaves allocated are not active in the dump-time segments: the trace and the segments disagree (a lost free?); the curves follow the trace", id, h.LiveNotInDump)})
	}
	if h.Anonymous > 0 {
		out = append(out, result.Diagnostic{Kind: "paired_by_size", Device: id, Message: fmt.Sprintf(
			"device %d: %d allocations carry no address: each free was paired with the latest allocation of the same size, so the curve is exact but lifetimes, and the categories that rest on them, are guesses", id, h.Anonymous)})
	}
	if h.Reuse > 0 {
		out = append(out, result.Diagnostic{Kind: "address_reuse", Device: id, Message: fmt.Sprintf(
			"device %d: %d allocations at an address that was still allocated: a free is missing from the trace", id, h.Reuse)})
	}
	if n := h.Sizing.Unknown; n > 0 {
		out = append(out, result.Diagnostic{Kind: "block_size_unknown", Device: id, Message: fmt.Sprintf(
			"device %d: %d blocks allocated before recording and freed in the trace (%s requested) show no block size: each counts as its request rounded to 512 B, though the allocator may have left up to 1 MiB more in each (the rest of the free block it was cut from)", id, n, units.FormatBytes(h.Sizing.unknownRequests))})
	}
	if n := h.Sizing.Mismatch; n > 0 {
		out = append(out, result.Diagnostic{Kind: "block_size_mismatch", Device: id, Message: fmt.Sprintf(
			"device %d: %d blocks live at the dump have another size than the caching allocator's rules give them: blocks freed during the trace may be off by up to 1 MiB each", id, n)})
	}
	if h.ReservedClamped {
		out = append(out, result.Diagnostic{Kind: "reserved_inconsistent", Device: id, Message: fmt.Sprintf(
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

// setMeta records the metadata m of block bi, the last block made, where it
// is a category (categoryMeta).
func (h *History) setMeta(bi int32, m uint32) {
	if m = h.categoryMeta(m); m == 0 {
		return
	}
	if h.metas == nil {
		h.metas = make([]uint32, 0, cap(h.Blocks))
	}
	h.metas = append(h.metas, make([]uint32, int(bi)-len(h.metas))...)
	h.metas = append(h.metas, m)
}

// blockMeta is block bi's "category:…" metadata, 0 when it has none.
func (h *History) blockMeta(bi int) uint32 {
	if bi < len(h.metas) {
		return h.metas[bi]
	}
	return 0
}
