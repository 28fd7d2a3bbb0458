package report

import (
	"sort"

	"github.com/torchmem/torchmem/result"
)

// timelineX returns the x value of every timeline point and whether it is a
// time (µs since the first point) rather than an event index. Times are used
// when every point has one and they never go backwards.
func timelineX(t *result.Timeline) (x []int64, isTime bool) {
	n := len(t.Allocated)
	x = make([]int64, n)
	if len(t.TimeUS) == n && n > 1 && t.TimeUS[n-1] > t.TimeUS[0] {
		isTime = true
		for i := 1; i < n; i++ {
			if t.TimeUS[i] < t.TimeUS[i-1] || t.TimeUS[i] <= 0 {
				isTime = false
				break
			}
		}
	}
	for i := range x {
		switch {
		case isTime:
			x[i] = t.TimeUS[i] - t.TimeUS[0]
		case i < len(t.EventIndex):
			x[i] = int64(t.EventIndex[i])
		default:
			x[i] = int64(i)
		}
	}
	return x, isTime
}

// thinIndexes chooses at most about max of n points to draw, so that the
// shape survives: x is cut into equal buckets and each bucket keeps the
// points where allocated memory is lowest and highest and where reserved
// memory is highest. The first and last points and every index in keep (the
// peak, the OOM) are always kept, exactly. All series of a chart use the same
// indexes, so stacked areas stay aligned. The result is sorted.
func thinIndexes(x, allocated, reserved []int64, keep []int, max int) []int {
	n := len(x)
	if n == 0 {
		return nil
	}
	if max < 8 {
		max = 8
	}
	if n <= max {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	// Three points per bucket, plus the kept ones.
	buckets := (max - 2 - len(keep)) / 3
	if buckets < 1 {
		buckets = 1
	}
	chosen := make(map[int]struct{}, max)
	add := func(i int) {
		if i >= 0 && i < n {
			chosen[i] = struct{}{}
		}
	}
	add(0)
	add(n - 1)
	for _, k := range keep {
		add(k)
	}
	lo, hi := x[0], x[n-1]
	span := hi - lo
	at := func(i int) int64 {
		if i < len(reserved) {
			return reserved[i]
		}
		return 0
	}
	i := 0
	for b := 0; b < buckets && i < n; b++ {
		// Bucket b holds x < lo + span*(b+1)/buckets (the last takes the rest).
		end := n
		if b < buckets-1 && span > 0 {
			limit := lo + int64(float64(span)*float64(b+1)/float64(buckets))
			end = i + sort.Search(n-i, func(k int) bool { return x[i+k] > limit })
		} else if span == 0 {
			end = min(n, i+(n+buckets-1)/buckets)
		}
		if end <= i {
			continue
		}
		minI, maxI, resI := i, i, i
		for j := i; j < end; j++ {
			if allocated[j] < allocated[minI] {
				minI = j
			}
			if allocated[j] > allocated[maxI] {
				maxI = j
			}
			if at(j) > at(resI) {
				resI = j
			}
		}
		add(minI)
		add(maxI)
		add(resI)
		i = end
	}
	idx := make([]int, 0, len(chosen))
	for k := range chosen {
		idx = append(idx, k)
	}
	sort.Ints(idx)
	return idx
}

// pick returns v at the given indexes (nil when v is shorter than needed).
func pick(v []int64, idx []int) []int64 {
	if len(idx) == 0 || len(v) <= idx[len(idx)-1] {
		return nil
	}
	out := make([]int64, len(idx))
	for k, i := range idx {
		out[k] = v[i]
	}
	return out
}
