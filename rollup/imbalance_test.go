package rollup

import (
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/result"
)

// madeUp is the analysis of a made-up rank's file: one CUDA device whose
// peak is all activations.
func madeUp(path string, peak int64) *result.Result {
	d := result.DeviceResult{Device: 0, Kind: "cuda", Peak: result.Peak{AllocatedBytes: peak, Phase: result.PhaseBackward}}
	d.Peak.Categories[result.Activation] = peak
	return &result.Result{Schema: result.SchemaID, Input: result.Input{Path: path}, Devices: []result.DeviceResult{d}}
}

// TestImbalanceAgainstTheOthers: the worst peak is compared with the median
// peak of the other rows, never with a median it is part of: with two ranks
// it is the one's peak over the other's (a median of both would halve the
// difference), with many the median of the rest.
func TestImbalanceAgainstTheOthers(t *testing.T) {
	const g = 1 << 30
	tests := []struct {
		peaks     []int64
		others    int64
		imbalance float64
	}{
		{[]int64{3 * g}, 0, 1},                          // one row: nothing to compare, alike
		{[]int64{2 * g, 3 * g}, 2 * g, 1.5},             // the other's peak
		{[]int64{3 * g, 2 * g, 2 * g}, 2 * g, 1.5},      // the worst first
		{[]int64{1 * g, 2 * g, 4 * g, 3 * g}, 2 * g, 2}, // median of 1, 2, 3 GiB
		{[]int64{1 * g, 1 * g, 4 * g, 3 * g, 2 * g}, 1.5 * g, 2.6667},
		{[]int64{2 * g, 2 * g}, 2 * g, 1}, // alike
		{[]int64{0, 0}, 0, 0},             // no memory: no ratio
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.peaks), func(t *testing.T) {
			b := NewBuilder()
			for r, p := range tc.peaks {
				b.Add(madeUp(fmt.Sprintf("rank%d.pickle", r), p))
			}
			ru := b.Rollup()
			if ru.OthersMedianPeakBytes != tc.others || ru.Imbalance != tc.imbalance {
				t.Errorf("others' median %d, imbalance %v; want %d, %v", ru.OthersMedianPeakBytes, ru.Imbalance, tc.others, tc.imbalance)
			}
		})
	}
}

// TestOutliersCapped: however many ranks stand out, the roll-up lists the
// maxOutliers farthest, farthest first, and counts the others.
func TestOutliersCapped(t *testing.T) {
	const g = 1 << 30
	for _, tc := range []struct{ ranks, high, listed, more int }{
		{ranks: 40, high: 5, listed: 5},
		{ranks: 1000, high: 100, listed: maxOutliers, more: 100 - maxOutliers},
		{ranks: 20000, high: 2000, listed: maxOutliers, more: 2000 - maxOutliers},
	} {
		t.Run(fmt.Sprintf("%d of %d", tc.high, tc.ranks), func(t *testing.T) {
			b := NewBuilder()
			for r := range tc.ranks {
				peak := int64(10 * g)
				if r%(tc.ranks/tc.high) == 1 {
					peak = 15*g + int64(r)<<20 // later ranks higher: farther out
				}
				b.Add(madeUp(fmt.Sprintf("rank%d.pickle", r), peak))
			}
			ru := b.Rollup()
			if len(ru.Outliers) != tc.listed || ru.OutliersMore != tc.more {
				t.Fatalf("%d outliers and %d more; want %d and %d", len(ru.Outliers), ru.OutliersMore, tc.listed, tc.more)
			}
			for i, o := range ru.Outliers {
				if o.Kind != OutlierPeak || i > 0 && o.PeakBytes > ru.Outliers[i-1].PeakBytes {
					t.Errorf("outlier %d: %+v is not the next farthest", i, o)
				}
			}
			if last := tc.ranks - tc.ranks/tc.high + 1; ru.Outliers[0].Rank != last {
				t.Errorf("the farthest is rank %d; want %d", ru.Outliers[0].Rank, last)
			}
		})
	}
}
