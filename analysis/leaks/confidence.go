package leaks

import (
	"math"
	"sort"

	"github.com/torchmem/torchmem/result"
)

// This file grades how certain a leak finding is, and holds the statistics
// (medians, coefficient of variation) the grades use.

// patternConfidence grades a pattern seen in seen eligible steps with
// per-step bytes and total bytes.
func (sc *leakScan) patternConfidence(seen int, per []int64, total int64) result.Confidence {
	E := sc.eligible()
	share := float64(seen) / float64(E)
	c := result.Low
	switch {
	case seen >= minPatternSteps+1 && share >= highPatternShare && leakCV(per) <= 0.35 && total >= highLeakBytes:
		c = result.High
	case seen >= minPatternSteps && share >= patternShareMin:
		c = result.Medium
	}
	return sc.capConfidence(c)
}

// capConfidence lowers a finding's confidence to what the steps support:
// steps found only from the period of allocation sites give medium at
// most, lifetimes paired by size (survivors are guesses) low.
func (sc *leakScan) capConfidence(c result.Confidence) result.Confidence {
	if c == result.High && !sc.plan.HighConfidence() {
		c = result.Medium
	}
	if sc.guessed && c != result.Low {
		c = result.Low
	}
	return c
}

// leakMedian64 returns the median (the upper one of an even count).
func leakMedian64(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]int64(nil), v...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	return s[len(s)/2]
}

// leakCV is the coefficient of variation of v (0 for fewer than two values or
// a zero mean).
func leakCV(v []int64) float64 {
	if len(v) < 2 {
		return 0
	}
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	mean := sum / float64(len(v))
	if mean == 0 {
		return 0
	}
	var ss float64
	for _, x := range v {
		d := float64(x) - mean
		ss += d * d
	}
	return math.Sqrt(ss/float64(len(v))) / math.Abs(mean)
}
