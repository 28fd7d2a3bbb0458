// Package resulttest makes results for the tests of the packages that read
// them (check, diff, rollup): a device and its phase spans written by
// hand, and the analyses of a simulated multi-rank job. It is test
// scaffolding, never linked into the torchmem binary.
package resulttest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// Device is a CUDA device's result: its peak (in forward, step 1) and end,
// each reserving 100 bytes more, the peak's categories, phases and sites.
func Device(id int, peak, end int64, peakCats result.Categories, phases []result.PhaseSpan, sites []result.Site) result.DeviceResult {
	return result.DeviceResult{Device: id, Kind: "cuda",
		AtEnd:  result.State{AllocatedBytes: end, ReservedBytes: end + 100},
		Peak:   result.Peak{AllocatedBytes: peak, ReservedBytes: peak + 100, Phase: result.PhaseForward, Step: 1, Categories: peakCats},
		Phases: phases, TopSites: sites}
}

// Span is a phase span of a step with its peak.
func Span(ph result.Phase, step int, peak int64) result.PhaseSpan {
	return result.PhaseSpan{Phase: ph, Step: step, PeakAllocatedBytes: peak}
}

// FaultyJob simulates snapshottest.FaultyJob(gen) and analyses each rank's
// snapshot as a per-rank file (oom_snapshot_rank3.pickle…), in reverse rank
// order, so that ranks must come from the names. sims[r] is rank r's
// simulation and ooms[r] its out-of-memory error (nil if none).
func FaultyJob(t testing.TB, gen byte) (results []*result.Result, sims []*st.Sim, ooms []*st.OutOfMemory) {
	t.Helper()
	job := st.FaultyJob(gen)
	sims, ooms = make([]*st.Sim, len(job)), make([]*st.OutOfMemory, len(job))
	for i := len(job) - 1; i >= 0; i-- {
		c := job[i]
		sims[c.Rank], ooms[c.Rank] = st.RankRun(c)
		data := st.Marshal(sims[c.Rank].Snapshot(), 4)
		s, err := load.Read(bytes.NewReader(data), fmt.Sprintf("job/oom_snapshot_rank%d.pickle", c.Rank), int64(len(data)), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, analysis.Analyze(s, analysis.DefaultOptions()))
	}
	return results, sims, ooms
}
