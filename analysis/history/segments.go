package history

import (
	"sort"

	"github.com/torchmem/torchmem/snapshot"
)

// segRange is a reserved address range: a segment, or a mapped part of an
// expandable segment.
type SegRange struct {
	Addr       uint64
	Size       int64
	Expandable bool
}

// End is the address just past the range.
func (r SegRange) End() uint64 { return r.Addr + uint64(r.Size) }

// SegmentsAt rebuilds the reserved ranges after event i by replaying the
// segment events backwards from the dump-time segments, as MemoryViz's
// Allocator State History does. It returns nil when the device has no
// dump-time segments.
func (h *History) SegmentsAt(i int) []SegRange {
	d := h.Device
	if len(d.Segments) == 0 {
		return nil
	}
	var rs []SegRange
	for gi := range d.Segments {
		g := &d.Segments[gi]
		rs = append(rs, SegRange{Addr: g.Address, Size: g.TotalSize, Expandable: g.IsExpandable})
	}
	for k := len(d.Events) - 1; k > i; k-- {
		e := &d.Events[k]
		switch e.Action {
		case snapshot.ActionSegmentAlloc:
			rs = removeRange(rs, e.Addr, e.Size)
		case snapshot.ActionSegmentMap:
			rs = removeRange(rs, e.Addr, e.Size)
		case snapshot.ActionSegmentFree:
			rs = append(rs, SegRange{Addr: e.Addr, Size: e.Size})
		case snapshot.ActionSegmentUnmap:
			rs = append(rs, SegRange{Addr: e.Addr, Size: e.Size, Expandable: true})
		}
	}
	sort.Slice(rs, func(a, b int) bool { return rs[a].Addr < rs[b].Addr })
	// Merge touching mapped ranges of expandable segments.
	out := rs[:0]
	for _, r := range rs {
		if r.Size <= 0 {
			continue
		}
		if n := len(out); n > 0 && r.Expandable && out[n-1].Expandable && out[n-1].End() == r.Addr {
			out[n-1].Size += r.Size
			continue
		}
		out = append(out, r)
	}
	return out
}

// removeRange subtracts [addr, addr+size) from the ranges.
func removeRange(rs []SegRange, addr uint64, size int64) []SegRange {
	end := addr + uint64(size)
	var out []SegRange
	for _, r := range rs {
		if r.End() <= addr || r.Addr >= end {
			out = append(out, r)
			continue
		}
		if r.Addr < addr {
			out = append(out, SegRange{Addr: r.Addr, Size: int64(addr - r.Addr), Expandable: r.Expandable})
		}
		if r.End() > end {
			out = append(out, SegRange{Addr: end, Size: int64(r.End() - end), Expandable: r.Expandable})
		}
	}
	return out
}

// Expandable reports whether the device used expandable segments.
func (h *History) Expandable() bool {
	if h.Snap.Settings != nil && h.Snap.Settings.ExpandableSegments {
		return true
	}
	for gi := range h.Device.Segments {
		if h.Device.Segments[gi].IsExpandable {
			return true
		}
	}
	return h.mapsSegments
}
