package analysis

import (
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestSuggestionsFitTrainingOrInference: inference runs (no backward, no
// optimizer, no gradients — checked by reading their traces) get no
// training-only suggestion; training runs get no inference-only one.
func TestSuggestionsFitTrainingOrInference(t *testing.T) {
	trainingOnly := []string{"activation_checkpointing", "qlora", "gradient_accumulation", "optimizer_8bit", "paged_optimizer", "set_to_none"}
	inferenceOnly := []string{"quantize_weights", "reduce_batch_size"}
	cases := []struct {
		file     string
		training bool
	}{
		{"genB_torch2.1_maphsge4_multistream_cpp.pickle", false},
		{"genE_torch2.5_sqattn.pickle", false},
		{"genD_torch2.4_lfielike_state_only.pickle", false},
		{"genG_torch2.1x_wedsonlin_inference.pickle", false},
		{"kkaitlyn_ctx128_fullstep.pickle", true},
		{"nothanmin_fullstep.pickle", true},
		{"wedsonlin_medium_128_training.pickle", true},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			s, err := load.Open(snapshottest.SharedFile(t, "snapshots", c.file), snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := Analyze(s, DefaultOptions())
			wrong := trainingOnly
			if c.training {
				wrong = inferenceOnly
			}
			for _, sg := range r.Suggestions {
				for _, w := range wrong {
					if sg.ID == w {
						t.Errorf("suggests %s (%s) for a %s run", sg.ID, sg.Title, map[bool]string{true: "training", false: "inference"}[c.training])
					}
				}
			}
		})
	}
}
