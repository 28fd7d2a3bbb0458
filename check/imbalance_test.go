package check

import (
	"testing"

	"github.com/torchmem/torchmem/internal/resulttest"
	"github.com/torchmem/torchmem/rollup"
)

func TestParseImbalance(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{{"1.2", 1.2, true}, {"1", 1, true}, {" 1.5x", 1.5, true}, {"2×", 2, true}, {"0.9", 0, false}, {"NaN", 0, false}, {"Inf", 0, false}, {"", 0, false}, {"12GiB", 0, false}} {
		got, err := ParseImbalance(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseImbalance(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestCheckImbalance: the simulated job's largest peak against the
// median, in bytes; one device is no imbalance at all (skipped).
func TestCheckImbalance(t *testing.T) {
	results, sims, _ := resulttest.FaultyJob(t, 'G')
	ru := rollup.Build(results)
	for _, tc := range []struct {
		limit  float64
		status Status
	}{{1.2, CheckFail}, {ru.Imbalance + 0.01, CheckPass}} {
		cr := CheckImbalance(ru, tc.limit)
		it := cr.Checks[0]
		if it.Status != tc.status || it.Actual != sims[3].PeakAllocated(0) || it.Limit != int64(tc.limit*float64(ru.MedianPeakBytes)) || it.Device != 3 {
			t.Errorf("limit %v: %+v", tc.limit, it)
		}
	}
	one := CheckImbalance(rollup.Build(results[:1]), 1.2)
	if one.Checks[0].Status != CheckSkip || one.Skipped != 1 {
		t.Errorf("one device: %+v", one.Checks[0])
	}
}
