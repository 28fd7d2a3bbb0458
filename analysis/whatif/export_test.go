package whatif

import (
	"github.com/torchmem/torchmem/analysis/estimate"
	"github.com/torchmem/torchmem/result"
)

// What the external tests read of the what-if's internals: they run the
// whole analysis (package analysis imports this one), then query the
// curves of the same history.
var (
	BuildCurves    = buildCurves
	Scaled         = scaled
	StaleGradients = staleGradients
)

// MaxOf is the largest sum of parts over the events (see maxOf).
func (c *curves) MaxOf(parts ...Part) int64 { return c.maxOf(parts...) }

// Peak is the peak of the curves under factors f and its event (see peak).
func (c *curves) Peak(f factors) (int64, int) { return c.peak(f) }

// Resolve runs ask, answering its queries by replays (see resolve).
func (c *curves) Resolve(ask func()) { c.resolve(ask) }

// Replays is how many times the curves replayed the events.
func (c *curves) Replays() int { return c.replays }

// WhatIf is the what-if of the curves' device (see whatIf).
func (c *curves) WhatIf(dr *result.DeviceResult, sugg []result.Suggestion, capacity int64) *result.WhatIf {
	return c.whatIf(dr, sugg, capacity)
}

// Project is the projection of the curves' device (see project).
func (c *curves) Project(r *result.Result, kb, ks float64, at, to Size, gpu *estimate.GPU) *estimate.Result {
	return c.project(r, kb, ks, at, to, gpu)
}
