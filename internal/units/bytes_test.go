package units

import (
	"math"
	"testing"
)

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{1023, "1023 B"},
		{1024, "1.00 KiB"},
		{1536, "1.50 KiB"},
		{10 << 10, "10.0 KiB"},
		{384 << 20, "384 MiB"},
		{(1 << 20) - 1, "1.00 MiB"}, // 1023.999 KiB rounds up into the next unit
		{1610612736, "1.50 GiB"},
		{23278534656, "21.7 GiB"},
		{8519680, "8.12 MiB"},
		{-(2 << 20), "-2.00 MiB"},
		{10<<30 + 1<<29, "10.5 GiB"}, // the cases of report.Size, the formatter it replaced
		{9<<30 + 820<<20, "9.80 GiB"},
		{54802667524, "51.0 GiB"},
		{1<<30 - 1, "1.00 GiB"},
		{math.MaxInt64, "8.00 EiB"},
		{math.MinInt64, "-8.00 EiB"},
	} {
		if got := FormatBytes(tc.in); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
