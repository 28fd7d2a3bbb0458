package main

import (
	"path/filepath"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// TestAnalyzeEveryInput runs analyze in every format on every real file in
// ../shared and every input fixture of the repository: each must succeed
// without an internal error.
func TestAnalyzeEveryInput(t *testing.T) {
	files := st.SharedInputs(t)
	for _, pat := range []string{"testdata/demo/*.pickle", "testdata/traces/*.json.gz", "testdata/*/*.pickle"} {
		m, _ := filepath.Glob(filepath.Join(repoRoot(), pat))
		files = append(files, m...)
	}
	if len(files) < 3 {
		t.Fatalf("only %d inputs found", len(files))
	}
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f] {
			continue
		}
		seen[f] = true
		t.Run(filepath.Base(f), func(t *testing.T) {
			for _, format := range []string{"json", "text", "markdown"} {
				code, out, stderr := runCLI(nil, "analyze", "--format", format, f)
				if code != exitOK || strings.Contains(stderr, "internal error") || out == "" {
					t.Fatalf("analyze --format %s: exit %d, stderr %q", format, code, stderr)
				}
			}
		})
	}
}
