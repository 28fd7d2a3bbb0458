package kineto_test

import (
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/snapshot"
)

// BenchmarkReadLargestTrace reads the largest real trace (52 MB of JSON,
// 216,092 events, 28,010 [memory] events) through Open.
func BenchmarkReadLargestTrace(b *testing.B) {
	path := traceFile(b, "hta_ddp_training_gpu_memory.json.gz")
	b.ReportAllocs()
	for b.Loop() {
		s, err := load.Open(path, snapshot.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Devices) != 2 {
			b.Fatalf("devices = %d", len(s.Devices))
		}
	}
}
