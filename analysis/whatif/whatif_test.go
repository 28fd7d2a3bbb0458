package whatif

import (
	"fmt"
	"math"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// TestWhatIfPartsSumToAllocated: the parts a projection scales are a
// partition of allocated memory at every event, on every real file.
func TestWhatIfPartsSumToAllocated(t *testing.T) {
	for _, path := range st.SharedInputs(t) {
		s := analysistest.Open(t, path)
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
