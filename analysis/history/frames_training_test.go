package history

import (
	"slices"
	"testing"
)

// TestNameWords splits identifiers the way the training-loop rule reads them.
func TestNameWords(t *testing.T) {
	for in, want := range map[string][]string{
		"forward_train":        {"forward", "train"},
		"_inner_training_loop": {"inner", "training", "loop"},
		"trainOneStep":         {"train", "one", "step"},
		"from_pretrained":      {"from", "pretrained"},
		"train_gpt2":           {"train", "gpt2"},
		"<module>":             {"module"},
		"":                     nil,
	} {
		if got := nameWords(in); !slices.Equal(got, want) {
			t.Errorf("nameWords(%q) = %q, want %q", in, got, want)
		}
	}
}
