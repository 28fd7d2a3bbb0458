package analysis

import (
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// TestCheckpointingRecomputesKeptActivations: checkpointing recomputes in
// backward what forward keeps for backward; the temporaries forward frees
// itself (a layer's scratch, an unrolled update loop's intermediates) are
// as large with it as without. A training run whose forward layers each
// keep an activation and use a temporary of tmp× its size: the what-if's
// checkpointing saves at most 65% of the activations kept at the peak —
// nothing of the temporaries — whatever the stacks, the layer count and
// the ratio.
func TestCheckpointingRecomputesKeptActivations(t *testing.T) {
	for _, kind := range frameKinds {
		for _, c := range []struct {
			layers int
			act    int64
			tmp    int64 // temporary per layer, in activations
		}{{4, 64 << 20, 0}, {8, 32 << 20, 2}, {6, 48 << 20, 8}, {12, 16 << 20, 30}} {
			t.Run(fmt.Sprintf("%s, %d layers of %d B, temporaries ×%d", kind, c.layers, c.act, c.tmp), func(t *testing.T) {
				x := fx{st.NewSim(), kind}
				s := x.s
				s.NoTrace = true
				w := s.Alloc(0, 256<<20, x.stack([]string{"at::native::empty_cuda(c10::ArrayRef<long>)"}, []*st.Dict{s.F("torch/nn/modules/linear.py", 106, "__init__")}, []*st.Dict{s.F("train.py", 10, "<module>")}))
				_ = w
				s.NoTrace = false
				fwd := x.stack(cppAddmm, []*st.Dict{s.F("torch/nn/modules/linear.py", 125, "forward")}, []*st.Dict{s.F("model.py", 40, "forward"), s.F("train.py", 21, "<module>")})
				for range 2 {
					var kept []uint64
					s.Annotate(0, "## forward ##", func() {
						for range c.layers {
							if c.tmp > 0 {
								tmp := s.Alloc(0, c.tmp*c.act, fwd)
								kept = append(kept, s.Alloc(0, c.act, fwd))
								s.Free(0, tmp)
							} else {
								kept = append(kept, s.Alloc(0, c.act, fwd))
							}
						}
					})
					s.Annotate(0, "backward", func() {
						bwd := x.stack(cppMmBwd, nil, nil)
						for l := len(kept) - 1; l >= 0; l-- {
							g := s.Alloc(0, c.act, bwd)
							s.Free(0, kept[l])
							s.Free(0, g)
						}
					})
				}
				r := Analyze(analysistest.Read(t, s, 0), DefaultOptions())
				d := r.Devices[0]
				keptAtPeak := d.Peak.Categories[result.Activation]
				var saving int64
				for _, p := range r.WhatIf.Suggestions {
					if p.ID == "activation_checkpointing" {
						saving = p.SavingBytes
					}
				}
				if limit := keptAtPeak * 65 / 100; saving > limit+1<<20 {
					t.Errorf("checkpointing saves %d B, more than 65%% of the %d B of activations kept at the peak (%v)", saving, keptAtPeak, d.Peak.Categories)
				}
				if sg := suggestionIn(r, "activation_checkpointing"); sg != nil && sg.EstimatedSavingsBytes > keptAtPeak*65/100+1<<20 {
					t.Errorf("suggested saving %d B over 65%% of %d B kept", sg.EstimatedSavingsBytes, keptAtPeak)
				}
				checkSavingsAreWhatIfs(t, r)
			})
		}
	}
}
