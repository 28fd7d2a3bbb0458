package analysis

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/snapshot"
)

// TestAttentionSuggestionIsWhatIfs: the fused-attention and shorter-sequence
// suggestions speak of the memory that grows with the square of the
// sequence — the scores, their softmax and their gradients — and so of the
// bytes the what-if scales by seq², not of everything attention code
// allocates (queries, keys and values repeated for grouped heads, the
// output: per-token tensors). Eager attention written as a library model
// (module frames) and as functions (user frames), multi-head and
// grouped-query, sequences of 2 to 32 head dimensions.
func TestAttentionSuggestionIsWhatIfs(t *testing.T) {
	for _, frames := range []string{"module", "user"} {
		for _, heads := range []struct{ h, a, kv int64 }{{512, 8, 8}, {512, 4, 2}, {1024, 16, 4}} {
			for _, k := range []int64{2, 8, 32} {
				c := st.EagerConfig{Layers: 3, Hidden: heads.h, Heads: heads.a, KVHeads: heads.kv, Seq: k * heads.h / heads.a, Batch: 4, Vocab: 5000, Steps: 2, Frames: frames}
				t.Run(c.Describe(), func(t *testing.T) {
					r := Analyze(analysistest.Read(t, st.EagerTrain(c), 0), DefaultOptions())
					w := r.WhatIf
					seq2 := units.FormatBytes(w.AttentionBytes)
					n := 0
					for _, sg := range r.Suggestions {
						if !strings.Contains(sg.Because, "attention tensors") {
							continue
						}
						n++
						if !strings.Contains(sg.Because, seq2) && !strings.Contains(sg.Because, fmt.Sprintf("%.0f%%", units.Percent(w.AttentionBytes, w.MeasuredPeakBytes))) {
							t.Errorf("%s: %q names neither the what-if's %s ∝ seq² nor its share", sg.ID, sg.Because, seq2)
						}
					}
					// From 8 head dimensions on, the scores are 20% or more of the peak.
					if want := k >= 8; (suggestionIn(r, "flash_attention") != nil) != want {
						t.Errorf("flash_attention suggested %v, want %v (%s ∝ seq² of %s; %v)", !want, want, seq2, units.FormatBytes(w.MeasuredPeakBytes), suggestionIDs(r))
					}
					if n > 0 && w.AttentionBytes == 0 {
						t.Errorf("attention suggestions %v with nothing ∝ seq²", suggestionIDs(r))
					}
					checkSavingsAreWhatIfs(t, r)
				})
			}
		}
	}
}

// TestAttentionSuggestionIsWhatIfsEveryRealFile: on every real file, a
// suggestion about attention tensors names the bytes the what-if scales by
// seq² (magma27's hand-written softmax: 2.25 GiB, not the 2.54 GiB all its
// attention code held; nesta's SDPA math backend: 3.38 GiB, not 6.56 GiB).
func TestAttentionSuggestionIsWhatIfsEveryRealFile(t *testing.T) {
	checked := 0
	for _, f := range st.SharedInputs(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := load.Open(f, snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := Analyze(s, DefaultOptions())
			for _, sg := range r.Suggestions {
				if !strings.Contains(sg.Because, "attention tensors") {
					continue
				}
				checked++
				if want := units.FormatBytes(r.WhatIf.AttentionBytes); !strings.Contains(sg.Because, want) {
					t.Errorf("%s: %q does not name the what-if's %s ∝ seq²", sg.ID, sg.Because, want)
				}
			}
		})
	}
	if checked < 2 {
		t.Errorf("%d attention suggestions checked: want magma27's and nesta's at least", checked)
	}
}
