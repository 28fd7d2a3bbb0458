package analysis

import (
	"fmt"
	"math"
	"testing"

	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// TestCUDAGraphPoolScalesWithBatch: a CUDA graph's pool holds the forward
// it captured, at the batch it was captured at: the what-if scales it with
// the batch like the eager forward's activations. A run projected to twice
// its batch is within 3% of the same run simulated at twice the batch —
// whether the eager warm-up is in the recording (its activations reach the
// same peak) or not (the pool alone holds the step's memory) — and, the
// capture being the peak, the peak's split puts the pool's bytes in the
// part that scales.
func TestCUDAGraphPoolScalesWithBatch(t *testing.T) {
	graphRun := func(x fx, layers int, unit int64, warmup bool) {
		s := x.s
		s.NoTrace = true
		s.Alloc(0, 512<<20, x.stack([]string{"at::native::empty_cuda(c10::ArrayRef<long>)"}, []*st.Dict{s.F("torch/nn/modules/linear.py", 106, "__init__")}, []*st.Dict{s.F("serve.py", 10, "main")}))
		s.NoTrace = false
		fwd := x.stack(cppAddmm, []*st.Dict{s.F("torch/nn/modules/linear.py", 125, "forward")}, []*st.Dict{s.F("model.py", 40, "forward"), s.F("serve.py", 20, "main")})
		run := func() uint64 {
			h := s.Alloc(0, unit, fwd)
			for range layers {
				n := s.Alloc(0, 4*unit, fwd)
				s.Free(0, h)
				h = s.Alloc(0, unit, fwd)
				s.Free(0, n)
			}
			return h
		}
		if warmup {
			s.Stream = 1
			s.Free(0, run())
		}
		s.Stream, s.Pool = 2, [2]int64{1, 0}
		run()
		s.Stream, s.Pool = 0, [2]int64{}
	}
	for _, kind := range frameKinds {
		for _, warmup := range []bool{true, false} {
			for _, c := range []struct {
				layers int
				unit   int64
			}{{2, 64 << 20}, {6, 16 << 20}, {4, 100 << 20}} {
				t.Run(fmt.Sprintf("%s, warm-up %v, %d layers of %d B", kind, warmup, c.layers, c.unit), func(t *testing.T) {
					x := fx{st.NewSim(), kind}
					graphRun(x, c.layers, c.unit, warmup)
					r := Analyze(analysistest.Read(t, x.s, 0), DefaultOptions())
					x2 := fx{st.NewSim(), kind}
					graphRun(x2, c.layers, 2*c.unit, warmup)
					want := x2.s.PeakAllocated(0)
					w := r.WhatIf
					for _, p := range w.Scaling {
						if p.BatchFactor == 2 && p.SeqFactor == 1 {
							if e := float64(p.PeakBytes-want) / float64(want); math.Abs(e) > 0.03 {
								t.Errorf("batch ×2 projected %d, simulated %d (%+.1f%%)", p.PeakBytes, want, 100*e)
							}
						}
					}
					// Without the warm-up the capture is the peak (with it, the
					// warm-up ties it first, and without frames nothing says
					// its blocks are a step's).
					if pool := 5 * c.unit; !warmup && w.LinearBytes < pool {
						t.Errorf("peak = %d fixed + %d ∝ batch·seq: the pool's %d at the peak scale", w.FixedBytes, w.LinearBytes, pool)
					}
				})
			}
		}
	}
}
