package history

import (
	"iter"
	"math"
	"sort"

	"github.com/torchmem/torchmem/snapshot"
)

// This file holds the curves of a history: the allocated, requested and
// reserved bytes after every event, kept as marks and change points rather
// than a value per event, and the blocks each event opens and ends.

// curveMark is how many events apart the history marks the allocated and
// requested bytes (History.allocMarks): a lookup replays at most as many.
const curveMark = 64

// AllocatedAt returns the allocated bytes after event i (i = −1: initial).
func (h *History) AllocatedAt(i int) int64 {
	v, _ := h.curvesAt(i)
	return v
}

// RequestedAt returns the requested bytes of the blocks allocated after
// event i (i = −1: initial); a chrome trace's equal its allocated bytes.
func (h *History) RequestedAt(i int) int64 {
	_, v := h.curvesAt(i)
	return v
}

// curvesAt returns the allocated and requested bytes after event i, from
// the mark before it.
func (h *History) curvesAt(i int) (alloc, req int64) {
	if i < 0 || len(h.allocMarks) == 0 {
		return h.InitialAllocated, h.InitialRequested
	}
	i = min(i, len(h.Device.Events)-1)
	k := (i + 1) / curveMark
	alloc, req = h.allocMarks[k], h.reqMarks[k]
	for e := k * curveMark; e <= i; e++ {
		da, dr := h.DeltaAt(e)
		alloc += da
		req += dr
	}
	return alloc, req
}

// DeltaAt is what event i adds to the allocated and the requested bytes:
// the block it opens (OpenAt) less the one it ends (EndAt), with the
// event's block looked up once.
func (h *History) DeltaAt(i int) (alloc, req int64) {
	a := h.Device.Events[i].Action
	if !hasBlock(a) {
		return 0, 0
	}
	bi := h.blockAt.at(i)
	b := &h.Blocks[bi]
	if a == snapshot.ActionAlloc {
		alloc, req = b.Size, b.Requested
	}
	switch {
	case h.ends(bi, i):
	case h.extraClose != nil && a == snapshot.ActionAlloc:
		old, ok := h.extraClose[i]
		if !ok || !h.ends(old, i) {
			return alloc, req
		}
		b = &h.Blocks[old]
	default:
		return alloc, req
	}
	return alloc - b.Size, req - b.Requested
}

// AllocatedRange yields the allocated bytes after each event from..to.
func (h *History) AllocatedRange(from, to int) iter.Seq2[int, int64] {
	return func(yield func(int, int64) bool) {
		v := h.AllocatedAt(from - 1)
		for i := max(from, 0); i <= to && i < len(h.Device.Events); i++ {
			d, _ := h.DeltaAt(i)
			v += d
			if !yield(i, v) {
				return
			}
		}
	}
}

// PeakIn returns the highest allocated bytes after the events from..to and
// the first event that reaches them (math.MinInt64 and from when empty).
func (h *History) PeakIn(from, to int) (int64, int) {
	best, at := int64(math.MinInt64), from
	for i, v := range h.AllocatedRange(from, to) {
		if v > best {
			best, at = v, i
		}
	}
	return best, at
}

// OpenAt is the block event i allocates (−1).
func (h *History) OpenAt(i int) int32 {
	if h.Device.Events[i].Action == snapshot.ActionAlloc {
		return h.blockAt.near(i)
	}
	return -1
}

// CloseAt is the block whose free event i completes (−1).
func (h *History) CloseAt(i int) int32 {
	if h.Device.Events[i].Action == snapshot.ActionFreeCompleted {
		return h.blockAt.at(i)
	}
	return -1
}

// EndAt is the block whose allocation event i ends (free_requested, or
// free_completed without one, or an allocation at the address of a block
// whose free is missing; −1).
func (h *History) EndAt(i int) int32 {
	a := h.Device.Events[i].Action
	if hasBlock(a) {
		// blockAt.at, without the call for a near block (EndAt is hot).
		x := h.blockAt
		bi := x.near(i)
		if x.dist[i] == farDist {
			bi = x.farAt(i)
		}
		if h.ends(bi, i) {
			return bi
		}
	}
	if h.extraClose != nil && a == snapshot.ActionAlloc {
		if bi, ok := h.extraClose[i]; ok && h.ends(bi, i) {
			return bi
		}
	}
	return -1
}

// ends reports whether block bi's allocation ends at event i.
func (h *History) ends(bi int32, i int) bool {
	b := &h.Blocks[bi]
	return !b.PendingAtStart && b.AllocEnd() == i
}

// ReservedAt returns the reserved bytes after event i (i = −1: initial).
func (h *History) ReservedAt(i int) int64 {
	p := h.resPoints
	if i < 0 || len(p) == 0 {
		return h.InitialReserved
	}
	k := sort.Search(len(p), func(k int) bool { return p[k].Event > i })
	if k == 0 {
		return h.InitialReserved
	}
	return p[k-1].Value
}

// replayReserved computes the reserved curve: from the chrome trace's
// Total Reserved counter, or by undoing segment events from the dump-time
// segments (reserved before = reserved after − allocated/mapped + freed/
// unmapped).
func (h *History) replayReserved() {
	d := h.Device
	if len(d.Reserved) > 0 {
		h.InitialReserved = d.Reserved[0].Value
		h.resPoints = d.Reserved
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
	changes := 0
	for i := range d.Events {
		if dv := delta(&d.Events[i]); dv != 0 {
			sum += dv
			changes++
		}
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
		h.ReservedClamped = true
	}
	h.InitialReserved = start
	h.resPoints = make([]snapshot.CounterPoint, 0, changes)
	cur = start
	for i := range d.Events {
		if dv := delta(&d.Events[i]); dv != 0 {
			cur += dv
			h.resPoints = append(h.resPoints, snapshot.CounterPoint{Event: i, Value: cur})
		}
	}
}
