package snapshottest

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
)

// The real snapshots and traces the tests read live in ../shared beside the
// repository, never in it. A test that needs them skips when they are
// absent, or fails when TORCHMEM_REQUIRE_SHARED is set (.ci/run sets it), so
// CI never skips them silently. TORCHMEM_SHARED points at another copy.

// SharedDir returns the folder <shared>/<sub>, skipping or failing the test
// when it is absent.
func SharedDir(t testing.TB, sub string) string {
	t.Helper()
	root := os.Getenv("TORCHMEM_SHARED")
	if root == "" {
		_, here, _, _ := runtime.Caller(0) // <repo>/snapshot/snapshottest/shared.go
		root = filepath.Join(filepath.Dir(here), "..", "..", "..", "shared")
	}
	dir := filepath.Join(root, sub)
	if _, err := os.Stat(dir); err != nil {
		missing(t, "%s not found: the real files live in ../shared beside the repository", dir)
	}
	return dir
}

// SharedFile returns the path of the real file <shared>/<sub>/<name>,
// skipping or failing the test when it is absent.
func SharedFile(t testing.TB, sub, name string) string {
	t.Helper()
	p := filepath.Join(SharedDir(t, sub), name)
	if _, err := os.Stat(p); err != nil {
		missing(t, "%s not found", p)
	}
	return p
}

// SharedInputs lists every real snapshot and trace, sorted.
func SharedInputs(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, sub := range []string{"snapshots", "traces"} {
		dir := SharedDir(t, sub)
		for _, pat := range []string{"*.pickle", "*.pkl", "*.json.gz"} {
			m, _ := filepath.Glob(filepath.Join(dir, pat))
			files = append(files, m...)
		}
	}
	if len(files) == 0 {
		missing(t, "no snapshots or traces in ../shared")
	}
	sort.Strings(files)
	return files
}

func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("TORCHMEM_REQUIRE_SHARED") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}
