package history

import (
	"testing"

	"github.com/torchmem/torchmem/snapshot"
)

// TestRoundSize checks round_size (CUDACachingAllocator.cpp), with and
// without roundup_power2_divisions read from allocator_settings: PyTorch's
// own example is a 1200 MiB request with 4 divisions between 1 GiB and
// 2 GiB (1024, 1280, 1536, 1792 MiB), which rounds to 1280 MiB.
func TestRoundSize(t *testing.T) {
	const mib = 1 << 20
	divs := `{"1": 0, "2": 8, "4": 0, "8": 0, "16": 0, "32": 0, "64": 0, "128": 0, "256": 0, "512": 0, "1024": 4, "2048": 0, "4096": 0, "8192": 0, "16384": 0, "32768": 2}`
	h := &History{Snap: &snapshot.Snapshot{Settings: &snapshot.AllocatorSettings{Other: map[string]string{"roundup_power2_divisions": divs}}}, Device: &snapshot.Device{}}
	with := h.SizingRules()
	var plain SizingRules
	tests := []struct {
		rules *SizingRules
		n     int64
		want  int64
	}{
		{&plain, 1, 512},
		{&plain, 512, 512},
		{&plain, 513, 1024},
		{&plain, 1200 * mib, 1200 * mib},
		{&with, 100, 512},
		{&with, 600 * 1024, 600 * 1024},           // below 1 MiB: interval "1" has no divisions
		{&with, 2*mib + 1, 2*mib + mib/4},         // 8 steps of 256 KiB between 2 and 4 MiB
		{&with, 3 * mib, 3 * mib},                 // on a step
		{&with, 1200 * mib, 1280 * mib},           // PyTorch's example
		{&with, 1024 * mib, 1024 * mib},           // a power of two stays
		{&with, 40 * 1024 * mib, 48 * 1024 * mib}, // the last interval covers all larger sizes
		{&with, 5 * mib, 5 * mib},                 // interval "4": no divisions, 512 B steps
	}
	for _, tc := range tests {
		if got := tc.rules.Round(tc.n); got != tc.want {
			t.Errorf("round(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	if with.Expandable || with.maxSplit != 0 {
		t.Errorf("rules %+v: no expandable segments, no max_split_size", with)
	}
}
