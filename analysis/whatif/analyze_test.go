package whatif_test

import (
	"testing"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/analysis/estimate"
	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/analysis/whatif"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// TestWhatIfSuggestions: each projection applies its technique at every
// event, so the combination is never above one of its members and nothing
// projects above the measured peak; set_to_none removes exactly the
// gradients kept across the step (nothanmin's zero_grad runs after the
// forward: 3.61 GiB of them).
func TestWhatIfSuggestions(t *testing.T) {
	s := analysistest.OpenShared(t, "snapshots", "nothanmin_fullstep.pickle")
	r := analysis.Analyze(s, analysis.DefaultOptions())
	w := r.WhatIf
	if w == nil || len(w.Suggestions) == 0 || w.Combination == nil {
		t.Fatalf("what-if %+v", w)
	}
	byID := map[string]result.Projection{}
	for _, p := range w.Suggestions {
		byID[p.ID] = p
		if p.PeakBytes > w.MeasuredPeakBytes || p.Method != "technique" {
			t.Errorf("%s: %+v above the measured %d", p.ID, p, w.MeasuredPeakBytes)
		}
	}
	for _, id := range w.Combination.IDs {
		if w.Combination.PeakBytes > byID[id].PeakBytes {
			t.Errorf("combination %v at %d, above %s alone (%d)", w.Combination.IDs, w.Combination.PeakBytes, id, byID[id].PeakBytes)
		}
	}
	h := history.Build(s, s.Devices[0])
	c := whatif.BuildCurves(h, 0)
	var staleRequested int64
	stale := c.MaxOf(whatif.PartStaleGrad)
	for bi := range whatif.StaleGradients(h) {
		staleRequested += h.Blocks[bi].Requested
	}
	if staleRequested != 3_877_647_360 || stale != w.Model.GradientBytes || stale < staleRequested {
		t.Errorf("stale gradients %d (%d requested), gradients %d; want the 969,411,840 fp32 gradients", stale, staleRequested, w.Model.GradientBytes)
	}
	if p, ok := byID["set_to_none"]; !ok || p.Phase != result.PhaseBackward {
		t.Errorf("set_to_none: %+v (the peak moves to backward)", p)
	}
}

// TestWhatIfCapacity: with a device size the combination is the cheapest
// that fits, projections say whether they fit, and the largest batch and
// sequence factors keep the projection within the usable memory.
func TestWhatIfCapacity(t *testing.T) {
	s := analysistest.OpenShared(t, "snapshots", "wedsonlin_medium_256_training.pickle")
	opts := analysis.DefaultOptions()
	opts.CapacityBytes = 8 << 30
	w := analysis.Analyze(s, opts).WhatIf
	// Usable: the capacity less the CUDA context and 5% of the rest.
	if capacity := int64(8 << 30); w.UsableBytes != int64(float64(capacity-estimate.ContextBytes)*0.95) {
		t.Fatalf("usable %d", w.UsableBytes)
	}
	for _, p := range w.Suggestions {
		if p.Fits == nil || *p.Fits != (p.PeakBytes <= w.UsableBytes) {
			t.Errorf("%s: fits %v at %d", p.ID, p.Fits, p.PeakBytes)
		}
	}
	if c := w.Combination; c == nil || len(c.IDs) != 1 || c.IDs[0] != "optimizer_8bit" || !*c.Fits {
		t.Errorf("combination %+v: want the 8-bit optimizer alone (cost 1, fits)", c)
	}
	h := history.Build(s, s.Devices[0])
	cv := whatif.BuildCurves(h, 0)
	for _, tc := range []struct {
		k   float64
		seq bool
	}{{w.MaxBatchFactor, false}, {w.MaxSeqFactor, true}} {
		f, g := whatif.Scaled(tc.k, 1), whatif.Scaled(tc.k+0.02, 1)
		if tc.seq {
			f, g = whatif.Scaled(1, tc.k), whatif.Scaled(1, tc.k+0.02)
		}
		at, _ := cv.Peak(f)
		beyond, _ := cv.Peak(g)
		if tc.k <= 0 || at > w.UsableBytes || beyond <= w.UsableBytes {
			t.Errorf("factor %.2f (seq %v): %d at it, %d beyond, usable %d", tc.k, tc.seq, at, beyond, w.UsableBytes)
		}
	}
}

// TestWhatIfCoversSuggestions: on every real file, each suggestion is
// projected by its technique (or, for what lowers reserved memory only,
// said to be so); only the leak fixes, whose saving is the leaked bytes,
// fall back to their estimated saving. A new suggestion needs its effect.
func TestWhatIfCoversSuggestions(t *testing.T) {
	leakFixes := map[string]bool{"detach_or_item": true, "no_grad_eval": true}
	for _, path := range st.SharedInputs(t) {
		opts := analysis.DefaultOptions()
		opts.NoTimeline = true
		r := analysis.Analyze(analysistest.Open(t, path), opts)
		if r.WhatIf == nil {
			continue
		}
		for _, p := range r.WhatIf.Suggestions {
			if p.Method == "estimated_saving" && !leakFixes[p.ID] {
				t.Errorf("%s: suggestion %s has no projected effect", path, p.ID)
			}
			if p.PeakBytes > r.WhatIf.MeasuredPeakBytes {
				t.Errorf("%s: %s projects %d, above the measured %d", path, p.ID, p.PeakBytes, r.WhatIf.MeasuredPeakBytes)
			}
		}
	}
}
