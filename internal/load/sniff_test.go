package load_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// TestLooksLikeInput: every real snapshot and trace is recognised by its
// start, gzip or not; what else a run folder holds is not.
func TestLooksLikeInput(t *testing.T) {
	for _, f := range st.SharedInputs(t) {
		head, err := load.Head(f)
		if err != nil {
			t.Fatal(err)
		}
		if !load.LooksLikeInput(head) {
			t.Errorf("%s: not recognised (starts %q)", filepath.Base(f), head[:min(len(head), 20)])
		}
	}
	tests := []struct {
		name string
		data string
		want bool
	}{
		{"pickle protocol 4", "\x80\x04\x95\x00", true},
		{"pickle protocol 2", "\x80\x02}q\x00", true},
		{"bare event array", `[{"ph": "X", "name": "aten::mm"}]`, true},
		{"memory timeline", "[[-1, 1, 37888, 7], [0, 2, 512, 1]]", true},
		{"trace_plot page", `<!DOCTYPE html><script>const x = {"base64": "gASV"}</script>`, true},
		{"torchmem analysis", `{"schema": "torchmem.analysis/v1", "input": {"format": "chrome-trace"}, "devices": [{"ph": 1}]}`, false},
		{"torchmem roll-up, compact", `{"schema":"torchmem.rollup/v1","inputs":[]}`, false},
		{"a config", `{"lr": 0.001, "batch_size": 8}`, false},
		{"a list of lists of words", `[["a", "b"]]`, false},
		{"a web page", "<html><body>hello</body></html>", false},
		{"a log", "step 1 loss 2.3\n", false},
		{"a Python file", "import torch\n", false},
		{"protocol 0 pickle", "(dp0\n", false},
		{"empty", "", false},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		if got := load.LooksLikeInput([]byte(tc.data)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, st.Gzip([]byte(tc.data)), 0o644); err != nil {
			t.Fatal(err)
		}
		if head, err := load.Head(p); err != nil || load.LooksLikeInput(head) != tc.want {
			t.Errorf("%s, gzip: %v (%v), want %v", tc.name, !tc.want, err, tc.want)
		}
	}
}
