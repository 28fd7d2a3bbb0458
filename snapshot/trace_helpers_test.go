package snapshot

import (
	"os"
	"path/filepath"
	"testing"
)

// traceFile returns the path of a real trace in ../shared/traces (or in
// $TORCHMEM_TRACES), skipping the test when it is absent (failing under
// TORCHMEM_REQUIRE_SHARED, as .ci/run sets).
func traceFile(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("TORCHMEM_TRACES")
	if dir == "" {
		dir = sharedDir(t, "traces")
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		missingShared(t, "%s not found", p)
	}
	return p
}
