package history

import (
	"math/bits"
	"regexp"
	"slices"
	"sort"
	"strconv"

	"github.com/torchmem/torchmem/snapshot"
)

// Block sizes in PyTorch's unit. A snapshot's trace entries carry the size
// the program asked for; torch.cuda.memory_allocated(), the dump's
// allocated_size and a chrome trace's Bytes count the allocator's blocks.
// A block is the request rounded by round_size, plus, in the large pool
// without expandable segments, the rest of the free block it was carved
// from when should_split keeps that rest (c10/cuda/CUDACachingAllocator.cpp):
//
//   - round_size: at least 512 B (kMinBlockSize), a multiple of 512 B, or the
//     next power-of-two division when roundup_power2_divisions is set;
//   - requests of at most 1 MiB (kSmallSize) use the small pool, whose rests
//     are split off when ≥ 512 B, as are all rests with expandable segments;
//   - in the large pool a rest is split off only when it is more than 1 MiB
//     and the rounded request is below max_split_size;
//   - a block is carved from the start of the smallest free block that fits,
//     and free neighbours are always merged: the free block an allocation
//     takes runs from its address to the next live block or the end of its
//     segment.
//
// Blocks live at the dump take the dump's own size; the rule is checked
// against them (blockSizeMismatch).
const (
	minBlockSize    = 512     // kMinBlockSize
	smallSize       = 1 << 20 // kSmallSize: the largest small-pool request, the largest rest kept unsplit
	roundupStartLog = 20      // roundup_power2_divisions intervals start at 1 MiB
	roundupSteps    = 16      // … and there are 16 of them (1 MiB to 32 GiB and above)
)

// SizingRules are the allocator settings block sizes depend on.
type SizingRules struct {
	Expandable bool
	maxSplit   int64 // 0: unlimited
	divisions  [roundupSteps]int64
}

// roundupEntry reads one "interval: divisions" pair of the rendered
// roundup_power2_divisions setting ({"1": 0, "2": 4, …}; keys in MiB).
var roundupEntry = regexp.MustCompile(`"?([0-9]+)"?\s*:\s*([0-9]+)`)

// SizingRules are the allocator's rules for the sizes of the run's blocks:
// its rounding (roundup_power2_divisions), expandable segments and
// max_split_size, from the file's allocator settings.
func (h *History) SizingRules() SizingRules {
	r := SizingRules{Expandable: h.Expandable()}
	st := h.Snap.Settings
	if st == nil {
		return r
	}
	if st.MaxSplitSize > 0 {
		r.maxSplit = st.MaxSplitSize
	}
	for _, m := range roundupEntry.FindAllStringSubmatch(st.Other["roundup_power2_divisions"], -1) {
		mib, err1 := strconv.ParseUint(m[1], 10, 63)
		div, err2 := strconv.ParseInt(m[2], 10, 64)
		if err1 != nil || err2 != nil || mib == 0 || mib&(mib-1) != 0 {
			continue
		}
		if k := bits.TrailingZeros64(mib); k < roundupSteps {
			r.divisions[k] = div
		}
	}
	return r
}

// Round is the allocator's round_size.
func (r *SizingRules) Round(n int64) int64 {
	if n < minBlockSize {
		return minBlockSize
	}
	k := max(0, bits.Len64(uint64(n))-1-roundupStartLog)
	if div := r.divisions[min(k, roundupSteps-1)]; div > 1 && n > minBlockSize*div {
		return roundupPower2Division(n, div)
	}
	return (n + minBlockSize - 1) / minBlockSize * minBlockSize
}

// roundupPower2Division rounds n up to the next of div equal steps between
// the powers of two around it (roundup_power2_next_division).
func roundupPower2Division(n, div int64) int64 {
	if n&(n-1) == 0 {
		return n
	}
	floor := int64(1) << (bits.Len64(uint64(n)) - 1)
	step := floor >> (bits.Len64(uint64(div)) - 1)
	if step == 0 {
		return floor << 1
	}
	if f := n &^ (step - 1); f != n {
		return f + step
	}
	return n
}

// keepsRest reports whether a large-pool block of rounded size r keeps the
// rest of its free block (should_split is false).
func (r *SizingRules) keepsRest(rounded, rest int64) bool {
	if r.Expandable || rest <= 0 {
		return false
	}
	return rest <= smallSize || r.maxSplit > 0 && rounded >= r.maxSplit
}

// blockSizing is what sizeBlocks found, for diagnostics.
type blockSizing struct {
	Mismatch        int   // blocks live at the dump whose inferred size is not the dump's
	Unknown         int   // blocks older than the trace, freed in it, whose rest cannot be known
	unknownRequests int64 // their requested bytes
}

// sizeBlocks sets the size of every block the dump does not size (dumped[bi]
// is true for those it does) by replaying the large-pool layout forwards.
// Small-pool blocks and blocks in expandable segments are their rounded
// request. A block older than the trace and freed in it is sized from its
// neighbours: the live block that follows it, or its segment's end, when the
// gap is 1 MiB or less (a free block in the large pool is always larger than
// 1 MiB: only such rests are split off), or the next block allocated right
// after it (that allocation began a free block, so this block ended there).
func (h *History) sizeBlocks(dumped []bool) {
	rules := h.SizingRules()
	lay := newLargeLayout(h.SegmentsAt(-1))
	large := func(bi int32) bool {
		b := &h.Blocks[bi]
		return b.Addr != 0 && !b.Untracked && !rules.Expandable && rules.Round(b.Requested) > smallSize
	}
	// guessed marks blocks older than the trace whose size is still the
	// rounded request; they are settled by what follows them.
	guessed := map[uint64]int32{}
	settle := func(bi int32, end uint64) {
		b := &h.Blocks[bi]
		if end > b.Addr {
			b.Size = int64(end - b.Addr)
		}
		delete(guessed, b.Addr)
	}
	follows := func(bi int32) {
		b := &h.Blocks[bi]
		next, ok := lay.next(b.Addr)
		if rest := int64(next-b.Addr) - b.Size; ok && (rest == 0 || rules.keepsRest(b.Size, rest)) {
			settle(bi, next)
		}
	}
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.Alloc >= 0 || b.Addr == 0 || b.Untracked {
			continue
		}
		if !dumped[bi] {
			b.Size = rules.Round(b.Requested)
		}
		if large(int32(bi)) {
			lay.add(b.Addr)
			if !dumped[bi] {
				guessed[b.Addr] = int32(bi)
			}
		}
	}
	for _, bi := range guessed {
		follows(bi)
	}
	var s blockSizing
	for i := range h.Device.Events {
		if bi := h.CloseAt(i); bi >= 0 && large(bi) {
			b := &h.Blocks[bi]
			if gi, ok := guessed[b.Addr]; ok && gi == bi {
				if follows(bi); guessed[b.Addr] == bi {
					// Nothing showed where it ended: its request rounded.
					s.Unknown++
					s.unknownRequests += b.Requested
					delete(guessed, b.Addr)
				}
			}
			lay.remove(b.Addr)
		}
		if bi, ok := h.extraClose[i]; ok && large(bi) {
			lay.remove(h.Blocks[bi].Addr)
		}
		switch e := &h.Device.Events[i]; e.Action {
		case snapshot.ActionSegmentAlloc:
			lay.addSegment(e.Addr, e.Size)
		case snapshot.ActionSegmentFree:
			lay.removeSegment(e.Addr)
		}
		bi := h.OpenAt(i)
		if bi < 0 {
			continue
		}
		b := &h.Blocks[bi]
		size := rules.Round(b.Requested)
		if large(bi) {
			if next, ok := lay.next(b.Addr); ok && rules.keepsRest(size, int64(next-b.Addr)-size) {
				size = int64(next - b.Addr)
			}
			if prev, ok := lay.prev(b.Addr); ok {
				if pi, ok := guessed[prev]; ok {
					settle(pi, b.Addr)
				}
			}
			lay.add(b.Addr)
		}
		if dumped[bi] {
			if size != b.Size {
				s.Mismatch++
			}
			continue
		}
		b.Size = size
	}
	h.Sizing = s
}

// largeLayout is the large-pool segments of a device at one moment, with
// the start addresses of their live blocks, sorted (2 MiB small-pool
// segments left out: no large block lives in them).
type largeLayout struct{ segs []*largeSegment }

type largeSegment struct {
	addr, end uint64
	starts    []uint64
}

func newLargeLayout(rs []SegRange) *largeLayout {
	l := &largeLayout{}
	for _, r := range rs {
		l.addSegment(r.Addr, r.Size)
	}
	return l
}

func (l *largeLayout) addSegment(addr uint64, size int64) {
	if size <= 0 {
		return
	}
	j := sort.Search(len(l.segs), func(k int) bool { return l.segs[k].addr >= addr })
	g := &largeSegment{addr: addr, end: addr + uint64(size)}
	if j < len(l.segs) && l.segs[j].addr == addr {
		l.segs[j] = g
		return
	}
	l.segs = slices.Insert(l.segs, j, g)
}

func (l *largeLayout) removeSegment(addr uint64) {
	j := sort.Search(len(l.segs), func(k int) bool { return l.segs[k].addr >= addr })
	if j < len(l.segs) && l.segs[j].addr == addr {
		l.segs = slices.Delete(l.segs, j, j+1)
	}
}

// find returns the segment holding addr, or nil.
func (l *largeLayout) find(addr uint64) *largeSegment {
	j := sort.Search(len(l.segs), func(k int) bool { return l.segs[k].addr > addr })
	if j == 0 || addr >= l.segs[j-1].end {
		return nil
	}
	return l.segs[j-1]
}

func (l *largeLayout) add(addr uint64) {
	if g := l.find(addr); g != nil {
		if j, found := slices.BinarySearch(g.starts, addr); !found {
			g.starts = slices.Insert(g.starts, j, addr)
		}
	}
}

func (l *largeLayout) remove(addr uint64) {
	if g := l.find(addr); g != nil {
		if j, found := slices.BinarySearch(g.starts, addr); found {
			g.starts = slices.Delete(g.starts, j, j+1)
		}
	}
}

// next returns where the free space after addr ends: the next live block's
// start or the end of addr's segment (false when addr is in no segment).
func (l *largeLayout) next(addr uint64) (uint64, bool) {
	g := l.find(addr)
	if g == nil {
		return 0, false
	}
	if j, _ := slices.BinarySearch(g.starts, addr+1); j < len(g.starts) {
		return g.starts[j], true
	}
	return g.end, true
}

// prev returns the start of the live block before addr in its segment.
func (l *largeLayout) prev(addr uint64) (uint64, bool) {
	g := l.find(addr)
	if g == nil {
		return 0, false
	}
	if j, _ := slices.BinarySearch(g.starts, addr); j > 0 {
		return g.starts[j-1], true
	}
	return 0, false
}
