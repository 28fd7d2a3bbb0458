package units

import "testing"

// TestPercent: a share of a whole in percent, 0 for an empty or negative
// whole (a device with nothing allocated has no shares).
func TestPercent(t *testing.T) {
	for _, tc := range []struct {
		part, whole int64
		want        float64
	}{
		{1, 4, 25},
		{3, 3, 100},
		{0, 10, 0},
		{5, 0, 0},
		{5, -1, 0},
		{3 << 30, 4 << 30, 75},
	} {
		if got := Percent(tc.part, tc.whole); got != tc.want {
			t.Errorf("Percent(%d, %d) = %v, want %v", tc.part, tc.whole, got, tc.want)
		}
	}
}
