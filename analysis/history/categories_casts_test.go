package history

import (
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestCastsGradientsRealFiles: on every real file, backward casts weight
// gradients to fp32 exactly in the runs made under autocast (the amp
// estimate snapshot, and the mixed-precision run's snapshot and trace:
// 171 of 225 gradients, 79% of their bytes, in each snapshot); in the
// fp32, pure bf16 (LoRA) and older runs no gradient follows a block of
// half its size.
func TestCastsGradientsRealFiles(t *testing.T) {
	autocast := map[string]bool{
		"llama_s_amp_b4_s1024.small.pickle.gz":    true,
		"hf_llama_mixed_ckpt_train.pickle.gz":     true,
		"hf_llama_mixed_ckpt_train.trace.json.gz": true,
	}
	seen := 0
	for _, f := range snapshottest.SharedInputs(t) {
		s, err := load.Open(f, snapshot.Options{})
		if err != nil {
			continue // a bad input's own tests say why
		}
		name := filepath.Base(f)
		for _, d := range s.Devices {
			got, want := castsGradients(Build(s, d)), autocast[name] && d.ID >= 0 // a trace's CPU memory has no backward
			if got != want {
				t.Errorf("%s device %d: casts gradients %v, want %v", name, d.ID, got, want)
			}
			if got {
				seen++
			}
		}
	}
	if seen != len(autocast) {
		t.Errorf("%d autocast runs found, want %d", seen, len(autocast))
	}
}
