package history

import (
	"sort"

	"github.com/torchmem/torchmem/result"
)

// small reports whether the segment belongs to the small pool (2 MiB
// segments; requests above 1 MiB never come from it).
func smallSegment(s result.SegmentState) bool { return !s.Expandable && s.Size == 2<<20 }

// StateAt rebuilds the allocator's segments after event i, and the live
// blocks and free gaps in them, by replaying the trace backwards from the
// dump-time segments. It returns nil when the file has no dump-time
// segments (chrome traces, traces without a state).
func StateAt(h *History, i int) []result.SegmentState {
	if len(h.Device.Segments) == 0 {
		return nil
	}
	rs := h.SegmentsAt(i)
	type iv struct {
		a, e uint64
		bi   int
	}
	var live []iv
	for bi := range h.Blocks {
		// A block freed but waiting on other streams still holds its memory.
		if b := &h.Blocks[bi]; b.ActiveAt(i) && !b.Untracked {
			live = append(live, iv{b.Addr, b.Addr + uint64(b.Size), bi})
		}
	}
	sort.Slice(live, func(a, b int) bool { return live[a].a < live[b].a })
	out := make([]result.SegmentState, 0, len(rs))
	li := 0
	for _, r := range rs {
		seg := result.SegmentState{Address: r.Addr, Size: r.Size, Expandable: r.Expandable}
		cur := r.Addr
		for li < len(live) && live[li].e <= r.Addr {
			li++
		}
		for k := li; k < len(live) && live[k].a < r.End(); k++ {
			if live[k].a > cur {
				seg.Blocks = append(seg.Blocks, result.BlockState{Address: cur, Size: int64(live[k].a - cur), Block: -1})
			}
			if start, end := max(cur, live[k].a), min(live[k].e, r.End()); end > start {
				seg.Blocks = append(seg.Blocks, result.BlockState{Address: start, Size: int64(end - start), Block: live[k].bi})
			}
			cur = max(cur, live[k].e)
		}
		if cur < r.End() {
			seg.Blocks = append(seg.Blocks, result.BlockState{Address: cur, Size: int64(r.End() - cur), Block: -1})
		}
		out = append(out, seg)
	}
	return out
}

// FragmentationAt measures the allocator's cached free memory after event
// i: the free pieces of the rebuilt segments, those inside segments that
// hold live blocks, and the largest one usable for a request of the given
// size (a request above 1 MiB never uses the small pool's 2 MiB segments).
func FragmentationAt(h *History, i int, request int64) result.Fragmentation {
	fr := result.Fragmentation{ExpandableSegments: h.Expandable()}
	segs := StateAt(h, i)
	if segs == nil {
		fr.CachedFreeBytes = max(0, h.ReservedAt(i)-h.AllocatedAt(i))
		fr.FreeInUsedSegmentsBytes = fr.CachedFreeBytes
		return fr
	}
	for _, g := range segs {
		var free int64
		used := false
		for _, b := range g.Blocks {
			if !b.Free() {
				used = true
				continue
			}
			free += b.Size
			fr.FreeBlocks++
			if request <= 1<<20 || !smallSegment(g) {
				fr.LargestFreeBlockBytes = max(fr.LargestFreeBlockBytes, b.Size)
			}
		}
		fr.CachedFreeBytes += free
		if used {
			fr.FreeInUsedSegmentsBytes += free
		}
	}
	fr.Fragmented = request > 0 && fr.CachedFreeBytes >= request && fr.LargestFreeBlockBytes < request
	return fr
}
