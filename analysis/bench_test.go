package analysis

import (
	"fmt"
	"os"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// BenchmarkAnalyzeGenerated reads and analyses generated snapshots and
// traces of about 10 MB, 100 MB and 1 GB — what `torchmem analyze` does
// before printing. Compare with python3 -c "import pickle; pickle.load(...)"
// and json.load on the same files (README, Performance). Cost must grow
// linearly: 10× the input, at most 11× the time.
func BenchmarkAnalyzeGenerated(b *testing.B) {
	for _, kind := range []string{"snapshot", "trace"} {
		for _, size := range []int64{10e6, 100e6, 1e9} {
			b.Run(fmt.Sprintf("%s/%dMB", kind, size/1e6), func(b *testing.B) {
				path, err := st.GeneratedFile(kind, size)
				if err != nil {
					b.Fatal(err)
				}
				info, err := os.Stat(path)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(info.Size())
				b.ReportAllocs()
				for b.Loop() {
					s, err := load.Open(path, snapshot.Options{})
					if err != nil {
						b.Fatal(err)
					}
					Analyze(s, DefaultOptions())
				}
			})
		}
	}
}
