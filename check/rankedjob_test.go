package check

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/analysis"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// rankedJob (a copy of the roll-up tests' faultyJob) simulates snapshottest.FaultyJob(gen) and analyses each rank's
// snapshot as a per-rank file (oom_snapshot_rank3.pickle…), in reverse rank
// order, so that ranks must come from the names. sims[r] is rank r's
// simulation and ooms[r] its out-of-memory error (nil if none).
func rankedJob(t *testing.T, gen byte) (results []*result.Result, sims []*st.Sim, ooms []*st.OutOfMemory) {
	t.Helper()
	job := st.FaultyJob(gen)
	sims, ooms = make([]*st.Sim, len(job)), make([]*st.OutOfMemory, len(job))
	for i := len(job) - 1; i >= 0; i-- {
		c := job[i]
		sims[c.Rank], ooms[c.Rank] = st.RankRun(c)
		data := st.Marshal(sims[c.Rank].Snapshot(), 4)
		s, err := snapshot.Read(bytes.NewReader(data), fmt.Sprintf("job/oom_snapshot_rank%d.pickle", c.Rank), int64(len(data)), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, analysis.Analyze(s, analysis.DefaultOptions()))
	}
	return results, sims, ooms
}
