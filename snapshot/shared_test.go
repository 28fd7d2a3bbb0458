package snapshot

import (
	"path/filepath"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// realSnapshots lists the real snapshot files in ../shared/snapshots.
func realSnapshots(t testing.TB) []string {
	dir := st.SharedDir(t, "snapshots")
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
