package analysis

import (
	"fmt"
	"math"
	"testing"

	"github.com/torchmem/torchmem/analysis/estimate"
	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// TestWhatIfPartsSumToAllocated: the parts a projection scales are a
// partition of allocated memory at every event, on every real file.
func TestWhatIfPartsSumToAllocated(t *testing.T) {
	for _, path := range st.SharedInputs(t) {
		s := openPath(t, path)
		for _, d := range s.Devices {
			if len(d.Events) == 0 {
				continue
			}
			h := history.Build(s, d)
			for j, v := range statesOf(buildCurves(h, 0)) {
				var sum int64
				for p := range v {
					sum += v[p]
				}
				if want := h.AllocatedAt(j - 1); sum != want {
					t.Errorf("%s device %d: parts sum to %d after event %d, allocated %d", path, d.ID, sum, j-1, want)
					break
				}
			}
		}
	}
}

// statesOf is the parts of every state of c (0: before the first event …
// n: after the last), from one replay.
func statesOf(c *curves) [][numParts]int64 {
	out := make([][numParts]int64, c.end()+1)
	c.resolve(func() {
		for j := range out {
			out[j] = c.at(j)
		}
	})
	return out
}

// simRun simulates a training run and returns its snapshot's history and
// the simulator's own peak.
func simRun(t *testing.T, c st.TrainConfig) (*history.History, int64) {
	t.Helper()
	sim := st.Train(c)
	s := analysistest.Read(t, sim, 0)
	return history.Build(s, s.Devices[0]), sim.PeakAllocated(0)
}

// TestProjectionSimulator projects a simulated run (GPT-style blocks with
// seq² attention scores, AdamW) to 2, 4 and 8 times its batch size and its
// sequence length and compares with the simulator's own runs at those
// sizes. What the simulator allocates in backward at the size of a
// parameter (a temporary per layer) does not scale with the batch, and the
// model counts it as if it did: the error that leaves is stated.
func TestProjectionSimulator(t *testing.T) {
	base := st.TrainConfig{Layers: 4, Hidden: 256, Seq: 256, Batch: 2, Heads: 4, Steps: 2, NoBwdStack: true}
	h, measured := simRun(t, base)
	c := buildCurves(h, 0)
	if p, _ := c.peak(unit()); p != measured {
		t.Fatalf("unscaled projection %d, simulator peak %d", p, measured)
	}
	for _, k := range []int64{2, 4, 8} {
		for _, seq := range []bool{false, true} {
			cfg, f := base, scaled(float64(k), 1)
			cfg.Batch *= k
			if seq {
				cfg, f = base, scaled(1, float64(k))
				cfg.Seq *= k
			}
			_, want := simRun(t, cfg)
			got, _ := c.peak(f)
			e := float64(got-want) / float64(want)
			t.Logf("%s: projected %d, simulated %d (%+.2f%%)", cfg.Describe(), got, want, 100*e)
			if math.Abs(e) > 0.05 {
				t.Errorf("%s: projected %d, simulated %d (%+.1f%%)", cfg.Describe(), got, want, 100*e)
			}
		}
	}
}

// TestProjectionWedsonlin: the same cs336 'medium' model trained at
// context 128 and 256 (batch 4, fp32, AdamW; MANIFEST.json), each
// projected to the other, within 15% of the other's measured peak.
func TestProjectionWedsonlin(t *testing.T) {
	peaks := map[int64]int64{}
	curvesAt := map[int64]*curves{}
	for _, seq := range []int64{128, 256} {
		s := analysistest.OpenShared(t, "snapshots", fmt.Sprintf("wedsonlin_medium_%d_training.pickle", seq))
		h := history.Build(s, s.Devices[0])
		curvesAt[seq] = buildCurves(h, 0)
		peaks[seq], _ = curvesAt[seq].peak(unit())
	}
	for _, tc := range []struct{ from, to int64 }{{128, 256}, {256, 128}} {
		got, _ := curvesAt[tc.from].peak(scaled(1, float64(tc.to)/float64(tc.from)))
		e := float64(got-peaks[tc.to]) / float64(peaks[tc.to])
		t.Logf("seq %d → %d: projected %d, measured %d (%+.2f%%)", tc.from, tc.to, got, peaks[tc.to], 100*e)
		if math.Abs(e) > 0.15 {
			t.Errorf("seq %d → %d: projected %d, measured %d (%+.1f%%)", tc.from, tc.to, got, peaks[tc.to], 100*e)
		}
	}
}

// TestWhatIfSuggestions: each projection applies its technique at every
// event, so the combination is never above one of its members and nothing
// projects above the measured peak; set_to_none removes exactly the
// gradients kept across the step (nothanmin's zero_grad runs after the
// forward: 3.61 GiB of them).
func TestWhatIfSuggestions(t *testing.T) {
	s := analysistest.OpenShared(t, "snapshots", "nothanmin_fullstep.pickle")
	r := Analyze(s, DefaultOptions())
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
	c := buildCurves(h, 0)
	var staleRequested int64
	stale := c.maxOf(partStaleGrad)
	for bi := range staleGradients(h) {
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
	opts := DefaultOptions()
	opts.CapacityBytes = 8 << 30
	w := Analyze(s, opts).WhatIf
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
	cv := buildCurves(h, 0)
	for _, tc := range []struct {
		k   float64
		seq bool
	}{{w.MaxBatchFactor, false}, {w.MaxSeqFactor, true}} {
		f, g := scaled(tc.k, 1), scaled(tc.k+0.02, 1)
		if tc.seq {
			f, g = scaled(1, tc.k), scaled(1, tc.k+0.02)
		}
		at, _ := cv.peak(f)
		beyond, _ := cv.peak(g)
		if tc.k <= 0 || at > w.UsableBytes || beyond <= w.UsableBytes {
			t.Errorf("factor %.2f (seq %v): %d at it, %d beyond, usable %d", tc.k, tc.seq, at, beyond, w.UsableBytes)
		}
	}
}

// openPath reads a real file by its path.
func openPath(t *testing.T, path string) *snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.Open(path, snapshot.Options{})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

// TestWhatIfCoversSuggestions: on every real file, each suggestion is
// projected by its technique (or, for what lowers reserved memory only,
// said to be so); only the leak fixes, whose saving is the leaked bytes,
// fall back to their estimated saving. A new suggestion needs its effect.
func TestWhatIfCoversSuggestions(t *testing.T) {
	leakFixes := map[string]bool{"detach_or_item": true, "no_grad_eval": true}
	for _, path := range st.SharedInputs(t) {
		opts := DefaultOptions()
		opts.NoTimeline = true
		r := Analyze(openPath(t, path), opts)
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
