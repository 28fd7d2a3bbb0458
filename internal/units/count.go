package units

import (
	"fmt"

	"github.com/dustin/go-humanize"
)

// Count formats an integer with thousands separators.
func Count(n int) string { return humanize.Comma(int64(n)) }

// Duration formats nanoseconds for people.
func Duration(ns int64) string {
	switch {
	case ns < 1e3:
		return fmt.Sprintf("%d ns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.1f µs", float64(ns)/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%.1f ms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.2f s", float64(ns)/1e9)
}

// Percent is part as a percentage of whole (0 when whole is not positive).
func Percent(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}
