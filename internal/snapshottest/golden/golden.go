// Package golden compares test outputs with golden files under testdata/;
// `go test ./... -update` rewrites them. It is apart from snapshottest so
// that tools/gen, which uses snapshottest to write its files, carries
// neither this nor its diff library.
package golden

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/internal/snapshottest"
)

// Check compares got with the golden file at path, or rewrites the file
// when the run has -update.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if snapshottest.Updating() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", path, diff)
	}
}
