package snapshottest

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Golden files hold the expected outputs of tests; `go test ./... -update`
// rewrites them. The flag is registered only in test binaries, so the
// torchmem binary (which uses this package for `gen`) gains no flag.
func init() {
	if testing.Testing() && flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

// Updating reports whether the test run was asked to rewrite golden files.
func Updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// Golden compares got with the golden file at path, or rewrites the file
// when the run has -update.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if Updating() {
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
