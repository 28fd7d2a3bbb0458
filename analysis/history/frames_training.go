package history

import (
	"path"
	"strings"
	"unicode"

	"github.com/torchmem/torchmem/snapshot"
)

// trainingWords are the words that name a training loop: in a function's
// name (train, train_one_step, training_step of Lightning and Hugging Face's
// Trainer, _inner_training_loop, forward_train, finetune) or a user script's
// (train.py, pretrain_gpt.py). "pretrained" is not one: from_pretrained
// loads weights.
var trainingWords = map[string]bool{"train": true, "training": true, "trainer": true, "trainers": true,
	"pretrain": true, "pretraining": true, "finetune": true, "finetuning": true}

// trainingFrame returns the first Python frame of the snapshot's stacks that
// belongs to a training loop ("Agent.py train"), or "". A file's name counts
// only for the user's own files: installed packages' trainer.py modules also
// evaluate and predict. PyTorch's own frames never count (Module.train only
// sets a flag).
func trainingFrame(s *snapshot.Snapshot) string {
	for i := range s.Frames {
		f := &s.Frames[i]
		if !IsPython(f) || IsTorch(f.Filename) {
			continue
		}
		file := path.Base(strings.ReplaceAll(f.Filename, "\\", "/"))
		words := nameWords(f.Name)
		if !IsLibrary(f.Filename) {
			words = append(words, nameWords(strings.TrimSuffix(file, ".py"))...)
		}
		for _, w := range words {
			if trainingWords[w] {
				return file + " " + f.Name
			}
		}
	}
	return ""
}

// nameWords splits an identifier into lower-case words at underscores,
// other non-letters and lower-to-upper case changes ("forwardTrain_step" →
// forward, train, step).
func nameWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	prevLower := false
	for _, r := range name {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
			prevLower = false
			continue
		case unicode.IsUpper(r) && prevLower:
			flush()
		}
		cur = append(cur, r)
		prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
	}
	flush()
	return words
}
