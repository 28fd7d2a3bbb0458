package rollup

import (
	"fmt"
	"slices"
	"testing"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// The facts below were computed without torchmem by
// testdata/facts/rollup_facts.py (Python's pickle, gzip and json).
const (
	threeDevFile  = "genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle"
	ddpFile       = "hta_ddp_training_gpu_memory.json.gz"
	threeDevOOMUS = 1757253257949855 // device 1's oom entry
)

// threeDevPeaks are the replayed peaks (allocator blocks) of devices 0, 1 and 2 of the
// 3-device snapshot; ddpPeak is the highest Total Allocated of cuda:1 in
// the DDP trace (rank 1 of 2 by its distributedInfo).
var (
	threeDevPeaks = []int64{8456489984, 84063358976, 21564660224}
	ddpPeak       = int64(6629508096)
)

func analyzeShared(t *testing.T, sub, name string) *result.Result {
	t.Helper()
	s, err := load.Open(st.SharedFile(t, sub, name), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return analysis.Analyze(s, analysis.DefaultOptions())
}

// TestRealMultiDevice rolls up the real multi-device OOM snapshot alone and
// with the real DDP trace: every device is a row, the DDP trace's rank is
// the one its distributedInfo states, and the worst device, the imbalance
// and the first OOM are those computed from the files by Python.
func TestRealMultiDevice(t *testing.T) {
	threeDev := analyzeShared(t, "snapshots", threeDevFile)
	ddp := analyzeShared(t, "traces", ddpFile)
	type rowFact struct {
		Rank, Device int
		From         RankSource
		Peak         int64
		OOM          bool
	}
	tests := []struct {
		name      string
		results   []*result.Result
		rows      []rowFact
		median    float64
		others    float64 // the median peak of the rows other than the worst
		outliers  []string
		notes     int
		heatTimed bool
	}{
		{"3-device snapshot", []*result.Result{threeDev}, []rowFact{
			{0, 0, FromOrder, threeDevPeaks[0], false},
			{0, 1, FromOrder, threeDevPeaks[1], true},
			{0, 2, FromOrder, threeDevPeaks[2], false},
		}, float64(threeDevPeaks[2]), float64(threeDevPeaks[0]+threeDevPeaks[2]) / 2,
			// Device 0 alone holds the model's parameters (trainers.py:121
			// __init__, on no other device: a pipeline split).
			[]string{"input 0 device 0 category_mix parameter"}, 0, true},
		{"3-device snapshot and DDP trace", []*result.Result{threeDev, ddp}, []rowFact{
			{0, 0, FromOrder, threeDevPeaks[0], false},
			{0, 1, FromOrder, threeDevPeaks[1], true},
			{0, 2, FromOrder, threeDevPeaks[2], false},
			{1, 1, FromDistributedInfo, ddpPeak, false}, // its CPU device is no row
		}, float64(threeDevPeaks[0]+threeDevPeaks[2]) / 2, float64(threeDevPeaks[0]), // ddpPeak < [0] < [2]
			// The OOM device's 78 GiB is 5.6× the median; the trace's
			// memory is mostly allocated before its window (unknown).
			[]string{"input 0 device 1 peak", "input 1 device 1 category_mix unknown"}, 1, true}, // wall clocks in both
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ru := Build(tc.results)
			var got []rowFact
			for _, r := range ru.Ranks {
				got = append(got, rowFact{r.Rank, r.Device, r.RankFrom, r.PeakBytes, r.OOM != nil})
			}
			if !slices.Equal(got, tc.rows) {
				t.Errorf("rows\n got %+v\nwant %+v", got, tc.rows)
			}
			if w := ru.Worst; w == nil || w.Input != 0 || w.Device != 1 || w.PeakBytes != threeDevPeaks[1] {
				t.Errorf("worst %+v; want the snapshot's device 1, %d bytes", w, threeDevPeaks[1])
			}
			if imb := round4(float64(threeDevPeaks[1]) / tc.others); ru.MedianPeakBytes != int64(tc.median) ||
				ru.OthersMedianPeakBytes != int64(tc.others) || ru.Imbalance != imb {
				t.Errorf("median %d, of the others %d, imbalance %v; want %d, %d, %v", ru.MedianPeakBytes, ru.OthersMedianPeakBytes,
					ru.Imbalance, int64(tc.median), int64(tc.others), imb)
			}
			f := ru.FirstOOM
			if ru.OOMs != 1 || f == nil || f.Input != 0 || f.Device != 1 || f.By != "time" || f.TimeUS != threeDevOOMUS {
				t.Errorf("%d OOMs, first %+v; want device 1 of the snapshot at %d", ru.OOMs, f, int64(threeDevOOMUS))
			}
			var outliers []string
			for _, o := range ru.Outliers {
				s := fmt.Sprintf("input %d device %d %s", o.Input, o.Device, o.Kind)
				if o.Category != nil {
					s += " " + o.Category.String()
				}
				outliers = append(outliers, s)
			}
			if !slices.Equal(outliers, tc.outliers) {
				t.Errorf("outliers %q; want %q", outliers, tc.outliers)
			}
			if len(ru.Notes) != tc.notes {
				t.Errorf("notes %q; want %d", ru.Notes, tc.notes)
			}
			if ru.Heat.ByTime != tc.heatTimed {
				t.Errorf("heat map by time: %v", ru.Heat.ByTime)
			}
		})
	}
}
