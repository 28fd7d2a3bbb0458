package analysis

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/internal/snapshottest/golden"
)

// TestGoldenJSON pins the whole torchmem.analysis/v1 JSON of simulated runs
// (its schema is a contract): a two-step training loop, and one that runs
// out of memory in the second forward with a fragmented cache.
func TestGoldenJSON(t *testing.T) {
	tests := []struct {
		name  string
		build func(r *rig)
	}{
		{"training_two_steps", func(r *rig) {
			for _, p := range paramSizes {
				r.s.Alloc(0, p, nil)
			}
			var state, grads []uint64
			for i := 0; i < 2; i++ {
				grads = r.step(&state, grads, true)
			}
		}},
		{"oom_fragmented_forward", func(r *rig) {
			for _, p := range paramSizes {
				r.s.Alloc(0, p, nil)
			}
			var state, grads []uint64
			grads = r.step(&state, grads, true)
			s := r.s
			s.Annotate(0, "Optimizer.zero_grad#AdamW.zero_grad", func() {
				for _, g := range grads {
					s.Free(0, g)
				}
			})
			for i := 0; i < 5; i++ {
				a := s.Alloc(0, 30*mib, r.fwd)
				s.Free(0, a)
				s.Alloc(0, 20*mib, r.attn)
			}
			s.OOM(0, 40*mib, 5*mib, r.attn)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig()
			tc.build(r)
			res := Analyze(analysistest.Read(t, r.s, 0), DefaultOptions())
			got, err := json.MarshalIndent(res, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("..", "testdata", "analysis", tc.name+".golden.json")
			golden.Check(t, path, got)
		})
	}
}
