package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// countStats makes statFile count its calls for the test.
func countStats(t *testing.T) *int {
	n := new(int)
	old := statFile
	statFile = func(p string) (fs.FileInfo, error) { *n++; return os.Stat(p) }
	t.Cleanup(func() { statFile = old })
	return n
}

// TestLocateLinear: matching a frame's file to the repository looks up at
// most maxSourceComponents tails of a path, however long (a 192 KB path of
// 98,304 components took one Stat each, each of a path as long: 105 s for
// check --github), still finds the file its tail names, and one run looks
// up at most maxSourceLookups paths in all. Lookups are counted, not timed.
func TestLocateLinear(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "d", "d"), 0o755)
	os.WriteFile(filepath.Join(root, "d", "d", "model.py"), []byte("x"), 0o644)
	long := strings.Repeat("d/", 98304) + "model.py" // 192 KiB
	stats := countStats(t)
	if got := locateIn(root, long); got != "d/d/model.py" {
		t.Errorf("locateIn(192 KiB path) = %q, want d/d/model.py", got)
	}
	if *stats > maxSourceComponents {
		t.Errorf("%d lookups for one path, more than %d", *stats, maxSourceComponents)
	}
	*stats = 0
	if got := locateIn(root, strings.Repeat("/x", 98304)+"/../d/d/model.py"); got != "" || *stats != 0 {
		t.Errorf("a path with '..' matched %q after %d lookups", got, *stats)
	}
	*stats = 0
	locate := sourceLocator(root)
	for i := range 2 * maxSourceLookups {
		locate(fmt.Sprintf("%s/%d/nowhere.py", long, i))
	}
	if *stats > maxSourceLookups {
		t.Errorf("%d lookups in one run, more than %d", *stats, maxSourceLookups)
	}
	t.Logf("%d lookups for %d distinct paths of 192 KiB", *stats, 2*maxSourceLookups)
}

// TestCheckGitHubLongPath: check --github on a snapshot whose allocation
// site is a file of a 192 KiB path, end to end: the annotation points at
// the repository's file its tail names, with at most maxSourceComponents
// lookups.
func TestCheckGitHubLongPath(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "repo", "d", "d"), 0o755)
	os.WriteFile(filepath.Join(dir, "repo", "d", "d", "model.py"), []byte("x"), 0o644)
	s := st.NewSim()
	site := s.Stack(s.F(strings.Repeat("d/", 98304)+"model.py", 7, "forward"))
	for range 4 {
		s.Alloc(0, 1<<30, site)
	}
	snap := writeTemp(t, dir, "long.pickle", st.Marshal(s.Snapshot(), 4))
	t.Setenv("GITHUB_STEP_SUMMARY", "")
	stats := countStats(t)
	code, out, stderr := runCLI(nil, "check", snap, "--budget", "peak=1GiB", "--github", "--source-root", filepath.Join(dir, "repo"))
	if code != exitFailed {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "::error file=d/d/model.py,line=7,") {
		t.Errorf("no annotation at d/d/model.py:7:\n%.2000s", out)
	}
	if *stats > maxSourceComponents {
		t.Errorf("%d lookups, more than %d", *stats, maxSourceComponents)
	}
}
