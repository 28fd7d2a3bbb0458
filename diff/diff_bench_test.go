package diff

import (
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/result"
)

// diffInput is an analysis of n phase spans, n sites and n leak findings
// (a JSON file of about 200·n bytes).
func diffInput(n int) *result.Result {
	r := &result.Result{Schema: result.SchemaID, Devices: []result.DeviceResult{{Device: 0}}}
	for i := range n {
		r.Devices[0].Phases = append(r.Devices[0].Phases, result.PhaseSpan{Phase: result.PhaseForward, Step: i, PeakAllocatedBytes: int64(i), Events: 1})
		r.Devices[0].TopSites = append(r.Devices[0].TopSites, result.Site{Site: fmt.Sprint("m.py:", i, " f"), Bytes: int64(i)})
		r.Leaks = append(r.Leaks, result.Leak{Kind: "step_growth", Site: fmt.Sprint("m.py:", i, " f"), BytesPerStep: int64(i)})
	}
	return r
}

// BenchmarkDiffLarge compares analyses of 4,000 and 16,000 rows: the time
// per row stays flat (leak findings were matched pairwise: 16,000 took 9 s).
func BenchmarkDiffLarge(b *testing.B) {
	for _, n := range []int{4000, 16000} {
		r := diffInput(n)
		b.Run(fmt.Sprint("rows=", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Diff(r, r)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/row")
		})
	}
}
