package analysis

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/torchmem/torchmem/snapshot"
)

// sharedFile returns ../shared/<sub>/<name> relative to the repository root
// (the real files live beside the repository, never in it), or skips the
// test when it is absent.
func sharedFile(t testing.TB, sub, name string) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(here), "..", "..", "shared", sub, name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not found: the real files live in ../shared beside the repository", p)
	}
	return p
}

// openShared reads a real file from ../shared.
func openShared(t testing.TB, sub, name string) *snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.Open(sharedFile(t, sub, name), snapshot.Options{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}
