package analysis

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// manyDevices is a snapshot of n devices, each running the same few steps
// (a run on n ranks' local devices, or a hostile file).
func manyDevices(t testing.TB, n int) *snapshot.Snapshot {
	data := st.Marshal(st.ManyDevices(n).Snapshot(), 4)
	snap, err := load.Read(bytes.NewReader(data), "devices.pickle", int64(len(data)), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestPerDeviceWorkLinear: reading and analysing a file of 256 devices
// allocates at most 2.5× what 128 devices do (work per device does not grow
// with the number of devices; it grew with its square: 100,000 devices
// took 15 s to read).
func TestPerDeviceWorkLinear(t *testing.T) {
	cost := func(n int) uint64 {
		s := manyDevices(t, n)
		return allocated(func() { Analyze(s, DefaultOptions()) })
	}
	c128, c256 := cost(128), cost(256)
	if float64(c256) > 2.5*float64(c128) {
		t.Errorf("analysis of 256 devices allocated %d bytes, 128 devices %d: not linear", c256, c128)
	}
}

// BenchmarkManyDevices analyses files of 64 and 256 devices: the time per
// device stays flat.
func BenchmarkManyDevices(b *testing.B) {
	for _, n := range []int{64, 256} {
		s := manyDevices(b, n)
		b.Run(fmt.Sprint("devices=", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Analyze(s, DefaultOptions())
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/device")
		})
	}
}
