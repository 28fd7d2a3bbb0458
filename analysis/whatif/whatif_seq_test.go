package whatif

import (
	"math"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// TestProjectionSeqFamilies: a run whose attention is written out (module
// or user frames; multi-head or grouped-query; head dimension 64 or 128;
// sequence 2 or 4 head dimensions — at 4, a head's scores are exactly as
// large as an MLP tensor, as in the cs336 runs at 256 tokens) projected to
// 2, 4 and 8 times its sequence is within 3% of the simulated run at that
// length: the scores and their gradients grow with seq², the per-token
// tensors of the same attention code (repeated keys and values, the
// output) linearly. (A run no longer than a head dimension is out of
// reach: its scores are no larger than the attention's output.)
func TestProjectionSeqFamilies(t *testing.T) {
	for _, frames := range []string{"module", "user"} {
		for _, heads := range []struct{ h, a, kv int64 }{{512, 8, 8}, {512, 4, 2}, {1024, 16, 4}} {
			for _, seq := range []int64{2 * heads.h / heads.a, 4 * heads.h / heads.a} {
				base := st.EagerConfig{Layers: 3, Hidden: heads.h, Heads: heads.a, KVHeads: heads.kv, Seq: seq, Batch: 2, Vocab: 5000, Steps: 2, Frames: frames}
				t.Run(base.Describe(), func(t *testing.T) {
					h, _ := simEager(t, base)
					// With the sequence length (estimate --from) and
					// without it (the what-if of analyze).
					for _, known := range []int64{seq, 0} {
						c := buildCurves(h, known)
						for _, k := range []int64{2, 4, 8} {
							cfg := base
							cfg.Seq *= k
							_, want := simEager(t, cfg)
							got, _ := c.peak(scaled(1, float64(k)))
							e := float64(got-want) / float64(want)
							if math.Abs(e) > 0.03 {
								t.Errorf("seq ×%d (length given: %d): projected %d, simulated %d (%+.1f%%)", k, known, got, want, 100*e)
							}
						}
					}
				})
			}
		}
	}
}

func simEager(t *testing.T, c st.EagerConfig) (*history.History, int64) {
	t.Helper()
	sim := st.EagerTrain(c)
	s := analysistest.Read(t, sim, 0)
	return history.Build(s, s.Devices[0]), sim.PeakAllocated(0)
}
