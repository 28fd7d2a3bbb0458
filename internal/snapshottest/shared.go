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
		_, here, _, _ := runtime.Caller(0) // <repo>/internal/snapshottest/shared.go
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

// SharedInputs lists every real snapshot and trace, sorted: the public
// files of snapshots/ and traces/, and PyTorch's own recordings in
// recorded/ (snapshots, gzipped or not, in the folder and its record_*
// and estimate/ folders; chrome traces and memory timelines). Tests that
// run over every real file read this list, so a file added to ../shared is
// covered without a change to them.
func SharedInputs(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, g := range sharedGlobs {
		dir := SharedDir(t, g.sub)
		for _, pat := range g.patterns {
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

// SharedRecorded lists the real files of recorded/ (SharedInputs' part of
// it), sorted, as paths relative to recorded/ ("record_train/x.pickle").
func SharedRecorded(t testing.TB) []string {
	t.Helper()
	dir := SharedDir(t, "recorded")
	var files []string
	for _, pat := range sharedGlobs[2].patterns {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, f := range m {
			rel, _ := filepath.Rel(dir, f)
			files = append(files, filepath.ToSlash(rel))
		}
	}
	sort.Strings(files)
	return files
}

// sharedGlobs are the real inputs of each folder of ../shared.
var sharedGlobs = []struct {
	sub      string
	patterns []string
}{
	{"snapshots", []string{"*.pickle", "*.pkl", "*.json.gz"}},
	{"traces", []string{"*.pickle", "*.pkl", "*.json.gz"}},
	{"recorded", []string{"*.pickle.gz", "*.json.gz", "*/*.pickle", "*/*.pickle.gz", "*/*.json.gz"}},
}

func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("TORCHMEM_REQUIRE_SHARED") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// RepoFile is the path of a file of the repository (elem from its root,
// like "testdata", "demo", "oom_snapshot.pickle"), whichever package's
// test asks: a path relative to the test's folder would change meaning
// when the test moves to another package, and a file not found would
// skip a test instead of failing it.
func RepoFile(elem ...string) string {
	_, here, _, _ := runtime.Caller(0) // <repo>/internal/snapshottest/shared.go
	return filepath.Join(append([]string{filepath.Dir(here), "..", ".."}, elem...)...)
}

// MeasuredSnapshots lists the snapshots this repository recorded on a GPU
// for its own calibration (testdata/estimate/measured), as paths relative
// to that folder: real files like ../shared's, so every one needs a row
// in the facts tables.
func MeasuredSnapshots(t testing.TB) (dir string, files []string) {
	t.Helper()
	dir = RepoFile("testdata", "estimate", "measured")
	m, err := filepath.Glob(filepath.Join(dir, "*.pickle.gz"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no snapshots in %s", dir)
	}
	for _, f := range m {
		files = append(files, filepath.Base(f))
	}
	sort.Strings(files)
	return dir, files
}

// RealSnapshots lists the real snapshot files in ../shared/snapshots
// (*.pickle and *.pkl), failing the test when there are none.
func RealSnapshots(t testing.TB) []string {
	dir := SharedDir(t, "snapshots")
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
