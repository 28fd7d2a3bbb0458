package snapshot

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// traceDir returns ../shared/traces beside the repository root (or
// $TORCHMEM_TRACES), skipping the test when it is absent.
func traceDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("TORCHMEM_TRACES"); d != "" {
		return d
	}
	_, here, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(here), "..", "..", "shared", "traces")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("%s not found: the real traces live in ../shared beside the repository", dir)
	}
	return dir
}

// traceFile returns the path of a real trace, skipping when it is absent.
func traceFile(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(traceDir(t), name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not found", p)
	}
	return p
}
