package units

import "math"

// Saturating arithmetic for the gate and the diff: their figures may come
// from a JSON file, and a sum or difference that wraps around would turn a
// huge growth into a pass. Past the int64 range the result sticks at its
// end.

// SatAdd is a+b, clamped to the int64 range.
func SatAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// SatSub is a−b, clamped to the int64 range.
func SatSub(a, b int64) int64 {
	switch {
	case b < 0 && a > math.MaxInt64+b:
		return math.MaxInt64
	case b > 0 && a < math.MinInt64+b:
		return math.MinInt64
	}
	return a - b
}
