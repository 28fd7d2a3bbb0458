package history

import (
	"fmt"
	"sort"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// RuleCUDAGraphPool classifies the memory of a captured CUDA graph: what
// the capture allocated in the graph's private pool (torch.cuda.graph,
// CUDA-graph trees of torch.compile). The pool keeps the graph's output and
// the blocks of its intermediates for as long as the graph lives; nothing
// outside the graph reuses them.
const RuleCUDAGraphPool = "cuda_graph_private_pool"

// graphPoolSegments are the dump's segments of CUDA graphs' private pools:
// a graph's pool id is (n, 0) with n ≥ 1 (a user's torch.cuda.MemPool is
// (0, n), the default pool (0, 0)).
func graphPoolSegments(d *snapshot.Device) []*snapshot.Segment {
	var out []*snapshot.Segment
	for i := range d.Segments {
		if g := &d.Segments[i]; g.PoolID[0] > 0 {
			out = append(out, g)
		}
	}
	return out
}

// graphPoolBlocks finds the blocks allocated in a graph's private pool:
// inside a graph-pool segment of the dump, on the segment's stream, after
// the segment's own allocation (the address may have held a segment of
// another pool before). Blocks already classified a workspace keep it.
func graphPoolBlocks(h *History) map[int]bool {
	segs := graphPoolSegments(h.Device)
	if len(segs) == 0 {
		return nil
	}
	sort.Slice(segs, func(a, b int) bool { return segs[a].Address < segs[b].Address })
	ev := h.Device.Events
	since := make([]int, len(segs)) // the segment's last segment_alloc (−1: before the recording)
	for k := range since {
		since[k] = -1
	}
	for i := range ev {
		if ev[i].Action != snapshot.ActionSegmentAlloc && ev[i].Action != snapshot.ActionSegmentMap {
			continue
		}
		if k := segmentAt(segs, ev[i].Addr); k >= 0 {
			since[k] = i
		}
	}
	out := map[int]bool{}
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.Untracked {
			continue
		}
		k := segmentAt(segs, b.Addr)
		if k < 0 || int(b.Alloc) < since[k] || b.Alloc >= 0 && streamOf(h.Snap, ev[b.Alloc].Stream) != segs[k].Stream {
			continue
		}
		out[bi] = true
	}
	return out
}

// segmentAt is the index of the segment holding addr (−1).
func segmentAt(segs []*snapshot.Segment, addr uint64) int {
	k := sort.Search(len(segs), func(i int) bool { return segs[i].Address > addr }) - 1
	if k >= 0 && addr < segs[k].Address+uint64(segs[k].TotalSize) {
		return k
	}
	return -1
}

// GraphPoolDiagnostic says what the graphs' private pools hold at the dump:
// their allocated blocks (the graphs' outputs and whatever else the
// capture kept) and the free rest, which only the graphs reuse.
func GraphPoolDiagnostic(h *History) (result.Diagnostic, bool) {
	segs := graphPoolSegments(h.Device)
	if len(segs) == 0 {
		return result.Diagnostic{}, false
	}
	pools := map[[2]int64]bool{}
	var total, alloc int64
	for _, g := range segs {
		pools[g.PoolID] = true
		total += g.TotalSize
		alloc += g.AllocatedSize
	}
	id := h.Device.ID
	what := "a CUDA graph's private pool"
	if len(pools) > 1 {
		what = fmt.Sprintf("%d CUDA graphs' private pools", len(pools))
	}
	return result.Diagnostic{Kind: "cuda_graph_pool", Device: id, Message: fmt.Sprintf(
		"device %d: %s reserves %s at the dump: %s allocated (the graph's static output and what its capture kept) and %s free that only the graph reuses (the blocks of its intermediates); the pool lives as long as the graph: deleting the graph (and torch.cuda.empty_cache()) returns it",
		id, what, units.FormatBytes(total), units.FormatBytes(alloc), units.FormatBytes(total-alloc))}, true
}

// streamOf is the raw stream of an event's stream index.
func streamOf(s *snapshot.Snapshot, i uint16) uint64 {
	if int(i) < len(s.Streams) {
		return s.Streams[i]
	}
	return 0
}
