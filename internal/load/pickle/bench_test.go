package pickle_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/load/pickle"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// largestSnapshot returns the largest real snapshot.
func largestSnapshot(b *testing.B) string {
	var best string
	var size int64
	for _, p := range snapshottest.RealSnapshots(b) {
		if st, err := os.Stat(p); err == nil && st.Size() > size {
			best, size = p, st.Size()
		}
	}
	return best
}

// BenchmarkReadLargestSnapshot decodes the largest real snapshot with the
// streaming decoder (compare: python3 -c "import pickle; pickle.load(open(F,'rb'))").
func BenchmarkReadLargestSnapshot(b *testing.B) {
	path := largestSnapshot(b)
	st, _ := os.Stat(path)
	b.SetBytes(st.Size())
	b.ReportAllocs()
	b.Run(filepath.Base(path), func(b *testing.B) {
		for b.Loop() {
			if _, err := load.Open(path, snapshot.Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReadReference decodes the same file with gopickle, for comparison.
func BenchmarkReadReference(b *testing.B) {
	path := largestSnapshot(b)
	b.ReportAllocs()
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pickle.ReadReference(f, path); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
