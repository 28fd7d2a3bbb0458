package rollup

import (
	"fmt"
	"slices"
	"testing"

	"github.com/torchmem/torchmem/internal/resulttest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// TestFaultyJob rolls up the 8 ranks of the simulated job with a leaking
// rank (1), a rank with twice the activations (3, which runs out of memory
// in step 2) and a rank with less memory (6, out of memory in step 1): the
// worst rank, the imbalance, the outliers and the first OOM are those the
// simulation made, with the peaks the simulator measured itself.
func TestFaultyJob(t *testing.T) {
	tests := []struct {
		gen       byte
		firstOOM  int
		by        string
		heatTimed bool
	}{
		{'G', 6, "time", true},  // rank 6 fails in step 1, rank 3 in step 2
		{'B', 3, "rank", false}, // PyTorch 2.1 snapshots have no times: the lowest rank
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("generation %c", tc.gen), func(t *testing.T) {
			results, sims, ooms := resulttest.FaultyJob(t, tc.gen)
			ru := Build(results)
			peaks := make([]int64, len(sims))
			for r, s := range sims {
				peaks[r] = s.PeakAllocated(0)
			}
			sorted := slices.Sorted(slices.Values(peaks))
			med := float64(sorted[3]+sorted[4]) / 2

			if ru.Inputs != 8 || len(ru.Ranks) != 8 {
				t.Fatalf("%d inputs, %d rows; want 8, 8", ru.Inputs, len(ru.Ranks))
			}
			for r, row := range ru.Ranks {
				if row.Rank != r || row.RankFrom != FromFileName || row.Device != r || row.Input != 7-r {
					t.Errorf("row %d: rank %d (%s), device %d, input %d; want rank %d from the file name on cuda:%d, input %d", r, row.Rank, row.RankFrom, row.Device, row.Input, r, r, 7-r)
				}
				if row.PeakBytes != peaks[r] {
					t.Errorf("rank %d: peak %d, the simulator's %d", r, row.PeakBytes, peaks[r])
				}
				if (row.OOM != nil) != (ooms[r] != nil) {
					t.Errorf("rank %d: OOM %v, simulated %v", r, row.OOM, ooms[r])
				} else if row.OOM != nil && row.OOM.RequestedBytes != ooms[r].Requested {
					t.Errorf("rank %d: OOM request %d, simulated %d", r, row.OOM.RequestedBytes, ooms[r].Requested)
				}
			}
			if w := ru.Worst; w == nil || w.Rank != 3 || w.Device != 3 || w.PeakBytes != peaks[3] {
				t.Errorf("worst %+v; want rank 3 with %d", w, peaks[3])
			}
			// The worst rank is compared with the median of the seven others
			// (sorted, the fourth of the peaks below rank 3's).
			others := float64(sorted[3])
			if ru.MedianPeakBytes != int64(med) || ru.OthersMedianPeakBytes != int64(others) || ru.Imbalance != round4(float64(peaks[3])/others) {
				t.Errorf("median %d, of the others %d, imbalance %v; want %d, %d, %v", ru.MedianPeakBytes, ru.OthersMedianPeakBytes,
					ru.Imbalance, int64(med), int64(others), round4(float64(peaks[3])/others))
			}
			// Rank 3 (twice the activations), 6 (stopped in step 1) and 1
			// (leaking) stand out by their peaks, farthest first; the five
			// healthy ranks, identical, do not.
			var got []string
			for _, o := range ru.Outliers {
				got = append(got, fmt.Sprintf("rank %d %s ×%.4f", o.Rank, o.Kind, o.Ratio))
			}
			var want []string
			for _, r := range []int{3, 6, 1} {
				want = append(want, fmt.Sprintf("rank %d peak ×%.4f", r, round4(float64(peaks[r])/med)))
			}
			if dev := func(r int) float64 { return abs(float64(peaks[r]) - med) }; dev(6) < dev(1) {
				want[1], want[2] = want[2], want[1]
			}
			if !slices.Equal(got, want) {
				t.Errorf("outliers %q; want %q", got, want)
			}
			if ru.OOMs != 2 || ru.FirstOOM == nil || ru.FirstOOM.Rank != tc.firstOOM || ru.FirstOOM.By != tc.by {
				t.Errorf("%d OOMs, first %+v; want 2, rank %d by %s", ru.OOMs, ru.FirstOOM, tc.firstOOM, tc.by)
			}
			if ru.Heat.ByTime != tc.heatTimed {
				t.Errorf("heat map by time %v; want %v", ru.Heat.ByTime, tc.heatTimed)
			}
			for r, cells := range ru.Heat.Cells {
				if top := slices.Max(cells[:]); top != peaks[r] {
					t.Errorf("rank %d: heat map's highest cell %d, peak %d", r, top, peaks[r])
				}
			}
			if len(ru.CommonSites) == 0 || ru.CommonSites[0].Ranks != 8 {
				t.Errorf("common sites %+v; want the first on all 8 ranks", ru.CommonSites)
			}
		})
	}
}

// TestFaultyJobLeak: the leaking rank's row carries its growing_list leak of
// one step's logits, and no other row has a leak.
func TestFaultyJobLeak(t *testing.T) {
	results, sims, _ := resulttest.FaultyJob(t, 'G')
	ru := Build(results)
	// One step's logits in allocator blocks (memory_allocated()'s unit):
	// what the leaking rank's simulation grew by in every step after the
	// first, which keeps the logits and nothing else (the 16,384,000 B
	// request's block keeps the rest of its 16 MiB segment).
	sa := sims[1].StepAllocated
	logits := sa[2] - sa[1]
	for k := 3; k < len(sa); k++ {
		if sa[k]-sa[k-1] != logits {
			t.Fatalf("rank 1 grew %v a step: not one logits block a step", sa)
		}
	}
	for _, row := range ru.Ranks {
		if row.Rank != 1 {
			if row.LeakCount != 0 {
				t.Errorf("rank %d: leaks %+v; want none", row.Rank, row.Leaks)
			}
			continue
		}
		if row.LeakCount == 0 || row.Leaks[0].Kind != "growing_list" || row.Leaks[0].BytesPerStep != logits || logits < st.FaultyJobModel.LogitsBytes() {
			t.Errorf("rank 1: leaks %+v; want growing_list of %d bytes a step (%d requested)", row.Leaks, logits, st.FaultyJobModel.LogitsBytes())
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
