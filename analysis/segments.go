package analysis

import (
	"sort"

	"github.com/torchmem/torchmem/snapshot"
)

// segRange is a reserved address range: a segment, or a mapped part of an
// expandable segment.
type segRange struct {
	addr       uint64
	size       int64
	expandable bool
}

func (r segRange) end() uint64 { return r.addr + uint64(r.size) }

// segmentsAt rebuilds the reserved ranges after event i by replaying the
// segment events backwards from the dump-time segments, as MemoryViz's
// Allocator State History does. It returns nil when the device has no
// dump-time segments.
func (h *History) segmentsAt(i int) []segRange {
	d := h.Device
	if len(d.Segments) == 0 {
		return nil
	}
	var rs []segRange
	for gi := range d.Segments {
		g := &d.Segments[gi]
		rs = append(rs, segRange{addr: g.Address, size: g.TotalSize, expandable: g.IsExpandable})
	}
	for k := len(d.Events) - 1; k > i; k-- {
		e := &d.Events[k]
		switch e.Action {
		case snapshot.ActionSegmentAlloc:
			rs = removeRange(rs, e.Addr, e.Size)
		case snapshot.ActionSegmentMap:
			rs = removeRange(rs, e.Addr, e.Size)
		case snapshot.ActionSegmentFree:
			rs = append(rs, segRange{addr: e.Addr, size: e.Size})
		case snapshot.ActionSegmentUnmap:
			rs = append(rs, segRange{addr: e.Addr, size: e.Size, expandable: true})
		}
	}
	sort.Slice(rs, func(a, b int) bool { return rs[a].addr < rs[b].addr })
	// Merge touching mapped ranges of expandable segments.
	out := rs[:0]
	for _, r := range rs {
		if r.size <= 0 {
			continue
		}
		if n := len(out); n > 0 && r.expandable && out[n-1].expandable && out[n-1].end() == r.addr {
			out[n-1].size += r.size
			continue
		}
		out = append(out, r)
	}
	return out
}

// removeRange subtracts [addr, addr+size) from the ranges.
func removeRange(rs []segRange, addr uint64, size int64) []segRange {
	end := addr + uint64(size)
	var out []segRange
	for _, r := range rs {
		if r.end() <= addr || r.addr >= end {
			out = append(out, r)
			continue
		}
		if r.addr < addr {
			out = append(out, segRange{addr: r.addr, size: int64(addr - r.addr), expandable: r.expandable})
		}
		if r.end() > end {
			out = append(out, segRange{addr: end, size: int64(r.end() - end), expandable: r.expandable})
		}
	}
	return out
}

// expandable reports whether the device used expandable segments.
func (h *History) expandable() bool {
	if h.Snap.Settings != nil && h.Snap.Settings.ExpandableSegments {
		return true
	}
	for gi := range h.Device.Segments {
		if h.Device.Segments[gi].IsExpandable {
			return true
		}
	}
	for k := range h.Device.Events {
		if a := h.Device.Events[k].Action; a == snapshot.ActionSegmentMap || a == snapshot.ActionSegmentUnmap {
			return true
		}
	}
	return false
}
