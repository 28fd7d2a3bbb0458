package analysis

import (
	"slices"
	"sort"

	"github.com/torchmem/torchmem/snapshot"
)

// The caching allocator carves a block from the start of the smallest free
// block that fits, and splits the rest off only when should_split says so
// (c10/cuda/CUDACachingAllocator.cpp): with expandable segments, or in the
// small pool, when the rest is at least 512 B; in the large pool only when
// it is more than kSmallSize (1 MiB) and the rounded request is below
// max_split_size. A rest that is not split stays in the block: the block is
// larger than the rounded request, memory_allocated() counts it, and it is
// not cached free memory.
const (
	smallSize  = 1 << 20 // kSmallSize: the largest small-pool request, and the largest rest kept unsplit
	smallSeg   = 2 << 20 // kSmallBuffer: a small-pool segment
	noMaxSplit = int64(-1)
)

// unsplitRests returns, for every block, the bytes the allocator left in it
// beyond its rounded request (0 for most blocks). A block allocated during
// the trace took the free block that ran from its address to the next live
// block or the end of its segment; a block live before the trace is sized
// the same way at the start. It returns nil when the rule cannot apply: no
// dump-time segments (chrome traces), or expandable segments.
func (h *History) unsplitRests() []int64 {
	if len(h.Device.Segments) == 0 || h.expandable() {
		return nil
	}
	maxSplit := noMaxSplit
	if st := h.Snap.Settings; st != nil && st.MaxSplitSize > 0 {
		maxSplit = st.MaxSplitSize
	}
	rests := make([]int64, len(h.Blocks))
	t := newLargeSegments(h.segmentsAt(-1))
	// rest sizes block k against the free block it was carved from.
	rest := func(k int) {
		b := &h.Blocks[k]
		r := roundUp512(b.Size)
		if b.Addr == 0 || b.Untracked || r <= smallSize {
			return
		}
		g := t.find(b.Addr)
		if g == nil {
			return
		}
		next := g.end
		if j, _ := slices.BinarySearch(g.starts, b.Addr+1); j < len(g.starts) {
			next = g.starts[j]
		}
		if next <= b.Addr+uint64(r) {
			return
		}
		gap := int64(next - b.Addr - uint64(r))
		if gap <= smallSize || maxSplit != noMaxSplit && r >= maxSplit {
			rests[k] = gap
		}
	}
	var before []int
	for k := range h.Blocks {
		if b := &h.Blocks[k]; b.Alloc < 0 && b.Addr != 0 && !b.Untracked {
			t.add(b.Addr)
			before = append(before, k)
		}
	}
	for _, k := range before {
		rest(k)
	}
	d := h.Device
	for i := range d.Events {
		e := &d.Events[i]
		if bi := h.closeAt[i]; bi >= 0 {
			t.remove(h.Blocks[bi].Addr)
		}
		if bi, ok := h.extraClose[i]; ok {
			t.remove(h.Blocks[bi].Addr)
		}
		switch e.Action {
		case snapshot.ActionSegmentAlloc:
			t.addSegment(e.Addr, e.Size)
		case snapshot.ActionSegmentFree:
			t.removeSegment(e.Addr)
		}
		if bi := h.openAt[i]; bi >= 0 {
			rest(int(bi))
			t.add(h.Blocks[bi].Addr)
		}
	}
	return rests
}

// fitUnsplitRests adds the unsplit rests to the blocks' Rounded size, except
// for blocks live at the dump, whose Rounded is the dump's own block size.
func (h *History) fitUnsplitRests() {
	rests := h.unsplitRests()
	if rests == nil {
		return
	}
	dumped := map[uint64]bool{}
	for gi := range h.Device.Segments {
		for _, b := range h.Device.Segments[gi].Blocks {
			if b.State == snapshot.BlockActiveAllocated || b.State == snapshot.BlockActivePendingFree {
				dumped[b.Address] = true
			}
		}
	}
	for k, r := range rests {
		if b := &h.Blocks[k]; r > 0 && !(b.Free < 0 && dumped[b.Addr]) {
			b.Rounded = roundUp512(b.Size) + r
		}
	}
}

// largeSegment is a segment of the large pool with the start addresses of
// its live blocks, sorted.
type largeSegment struct {
	addr, end uint64
	starts    []uint64
}

// largeSegments are the large-pool segments of a device at one moment,
// sorted by address (small-pool 2 MiB segments and expandable ranges left
// out: the unsplit rule does not apply to them).
type largeSegments struct{ segs []*largeSegment }

func newLargeSegments(rs []segRange) *largeSegments {
	t := &largeSegments{}
	for _, r := range rs {
		t.addSegment(r.addr, r.size)
	}
	return t
}

func (t *largeSegments) addSegment(addr uint64, size int64) {
	if size == smallSeg || size <= 0 {
		return
	}
	j := sort.Search(len(t.segs), func(k int) bool { return t.segs[k].addr >= addr })
	if j < len(t.segs) && t.segs[j].addr == addr {
		t.segs[j] = &largeSegment{addr: addr, end: addr + uint64(size)}
		return
	}
	t.segs = slices.Insert(t.segs, j, &largeSegment{addr: addr, end: addr + uint64(size)})
}

func (t *largeSegments) removeSegment(addr uint64) {
	j := sort.Search(len(t.segs), func(k int) bool { return t.segs[k].addr >= addr })
	if j < len(t.segs) && t.segs[j].addr == addr {
		t.segs = slices.Delete(t.segs, j, j+1)
	}
}

// find returns the segment holding addr, or nil.
func (t *largeSegments) find(addr uint64) *largeSegment {
	j := sort.Search(len(t.segs), func(k int) bool { return t.segs[k].addr > addr })
	if j == 0 || addr >= t.segs[j-1].end {
		return nil
	}
	return t.segs[j-1]
}

func (t *largeSegments) add(addr uint64) {
	if g := t.find(addr); g != nil {
		if j, found := slices.BinarySearch(g.starts, addr); !found {
			g.starts = slices.Insert(g.starts, j, addr)
		}
	}
}

func (t *largeSegments) remove(addr uint64) {
	if g := t.find(addr); g != nil {
		if j, found := slices.BinarySearch(g.starts, addr); found {
			g.starts = slices.Delete(g.starts, j, j+1)
		}
	}
}
