package rollup

import (
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/result"
)

// syntheticRanks makes n results of one device each, with 40 phase spans
// over ten steps, ten sites and peaks that differ a little.
func syntheticRanks(n int) []*result.Result {
	out := make([]*result.Result, n)
	for r := range out {
		peak := int64(20<<30) + int64(r%37)<<20
		d := result.DeviceResult{Device: r % 8, Kind: "cuda", Peak: result.Peak{AllocatedBytes: peak, Phase: result.PhaseBackward, Step: 3}}
		d.Peak.Categories[result.Activation] = peak / 2
		d.Peak.Categories[result.Parameter] = peak / 2
		t0 := int64(1_754_000_000_000_000) + int64(r)
		for k := 0; k < 40; k++ {
			d.Phases = append(d.Phases, result.PhaseSpan{Phase: result.PhaseForward, Step: k / 4, StartUS: t0 + int64(k)*1000, EndUS: t0 + int64(k)*1000 + 999,
				StartEvent: 100 * k, EndEvent: 100*k + 99, PeakAllocatedBytes: peak - int64(k%4)<<20, Events: 100})
		}
		for i := 0; i < 10; i++ {
			d.TopSites = append(d.TopSites, result.Site{Site: fmt.Sprintf("model.py:%d forward", 60+i), Bytes: peak / int64(i+2), Count: 3, Category: result.Activation})
		}
		out[r] = &result.Result{Schema: result.SchemaID, Input: result.Input{Path: fmt.Sprintf("run/rank%d.pickle", r)}, Devices: []result.DeviceResult{d}}
	}
	return out
}

// BenchmarkBuild10000 rolls up 10,000 ranks' results (the roll-up alone:
// rows, outliers, first OOM, common sites, heat map).
func BenchmarkBuild10000(b *testing.B) {
	results := syntheticRanks(10000)
	b.ReportAllocs()
	for b.Loop() {
		Build(results)
	}
}
