package snapshot

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// sharedDir returns ../shared/<sub> relative to the repository root, or skips
// the test when it is absent (.ci/run fails instead when it is missing).
func sharedDir(t testing.TB, sub string) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(here), "..", "..", "shared", sub)
	if _, err := os.Stat(dir); err != nil {
		missingShared(t, "%s not found: the real files live in ../shared beside the repository", dir)
	}
	return dir
}

// realSnapshots lists the real snapshot files in ../shared/snapshots.
func realSnapshots(t testing.TB) []string {
	dir := sharedDir(t, "snapshots")
	var out []string
	for _, pat := range []string{"*.pickle", "*.pkl"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		out = append(out, m...)
	}
	if len(out) == 0 {
		t.Fatalf("no snapshots in %s", dir)
	}
	return out
}

// missingShared skips a test whose real files are absent, or fails it when
// TORCHMEM_REQUIRE_SHARED is set (as .ci/run does), so CI never skips silently.
func missingShared(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("TORCHMEM_REQUIRE_SHARED") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}
