package analysis

import (
	"sort"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/result"
)

// DefaultMaxTimelinePoints bounds Timeline when Options does not.
const DefaultMaxTimelinePoints = 20000

// buildTimeline samples the allocated, reserved and per-category curves.
// With more events than maxPoints it keeps, per bucket of consecutive
// events, the events of the lowest and the highest allocated value, plus the
// peak and the OOM event, so that extremes stay exact.
func buildTimeline(h *history.History, peak, oom, maxPoints int) *result.Timeline {
	n := len(h.Device.Events)
	if maxPoints <= 0 {
		maxPoints = DefaultMaxTimelinePoints
	}
	var pick []int
	if n <= maxPoints {
		pick = make([]int, n)
		for i := range pick {
			pick[i] = i
		}
	} else {
		buckets := maxPoints/2 - 1
		size := (n + buckets - 1) / buckets
		for s := 0; s < n; s += size {
			e := min(n, s+size)
			lo, hi := s, s
			var low, high int64
			for i, v := range h.AllocatedRange(s, e-1) {
				if i == s || v < low {
					lo, low = i, v
				}
				if i == s || v > high {
					hi, high = i, v
				}
			}
			pick = append(pick, min(lo, hi))
			if lo != hi {
				pick = append(pick, max(lo, hi))
			}
		}
		for _, x := range []int{peak, oom, n - 1} {
			if x >= 0 && x < n {
				pick = append(pick, x)
			}
		}
		sort.Ints(pick)
		uniq := pick[:0]
		for i, x := range pick {
			if i == 0 || x != pick[i-1] {
				uniq = append(uniq, x)
			}
		}
		pick = uniq
	}
	t := &result.Timeline{PeakPoint: -1, OOMPoint: -1}
	t.EventIndex = pick
	t.TimeUS = make([]int64, len(pick))
	t.Allocated = make([]int64, len(pick))
	t.Reserved = make([]int64, len(pick))
	for c := range t.ByCategory {
		t.ByCategory[c] = make([]int64, len(pick))
	}
	var cur result.Categories
	for bi := range h.Blocks {
		if b := &h.Blocks[bi]; b.LiveAt(-1) {
			cur[b.Category] += b.Size
		}
	}
	pi := 0
	alloc := h.InitialAllocated
	for i := 0; i < n && pi < len(pick); i++ {
		da, _ := h.DeltaAt(i)
		alloc += da
		if bi := h.OpenAt(i); bi >= 0 {
			cur[h.Blocks[bi].Category] += h.Blocks[bi].Size
		}
		if bi := h.EndAt(i); bi >= 0 {
			cur[h.Blocks[bi].Category] -= h.Blocks[bi].Size
		}
		if pick[pi] != i {
			continue
		}
		t.TimeUS[pi] = h.TimeUS(i)
		t.Allocated[pi] = alloc
		t.Reserved[pi] = h.ReservedAt(i)
		for c := range cur {
			t.ByCategory[c][pi] = cur[c]
		}
		if i == peak {
			t.PeakPoint = pi
		}
		if i == oom {
			t.OOMPoint = pi
		}
		pi++
	}
	if !reservedKnown(h) { // no reserved curve rather than one at 0
		t.Reserved = nil
	}
	return t
}
