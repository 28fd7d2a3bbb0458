package analysis

import (
	"testing"

	"github.com/torchmem/torchmem/internal/snapshottest"

	"github.com/torchmem/torchmem/snapshot"
)

// sharedFile returns the path of a real file in ../shared.
func sharedFile(t testing.TB, sub, name string) string {
	t.Helper()
	return snapshottest.SharedFile(t, sub, name)
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
