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
