package analysis

import (
	"bytes"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// TestAnalyzeReportsLeaks: Analyze carries leak findings into the Result and
// turns them into the matching suggestion, ranked by the bytes it saves.
func TestAnalyzeReportsLeaks(t *testing.T) {
	cases := []struct {
		name     string
		sim      *st.Sim
		kind, id string
	}{
		{"eval under grad mode", st.EvalLoop(st.DefaultLeakConfig, true), "retained_graph", "no_grad_eval"},
		{"outputs.append(logits)", st.TrainLoopGrowingList(st.DefaultLeakConfig), "growing_list", "detach_or_item"},
		{"healthy", st.TrainLoopHealthy(st.DefaultLeakConfig), "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := st.Marshal(c.sim.Snapshot(), 4)
			s, err := load.Read(bytes.NewReader(data), c.name, int64(len(data)), snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := Analyze(s, DefaultOptions())
			var kinds []string
			for _, l := range r.Leaks {
				if l.Confidence != result.Low {
					kinds = append(kinds, l.Kind)
				}
			}
			found := false
			for _, sg := range r.Suggestions {
				if sg.ID == c.id {
					found = true
				}
				if c.id == "" && (sg.ID == "no_grad_eval" || sg.ID == "detach_or_item") {
					t.Errorf("healthy loop got suggestion %s", sg.ID)
				}
			}
			if c.kind == "" {
				if len(kinds) > 0 {
					t.Errorf("healthy loop: findings %v", kinds)
				}
				return
			}
			if len(kinds) == 0 || kinds[0] != c.kind || !found {
				t.Errorf("findings %v, suggestion %s found %v; want %s", kinds, c.id, found, c.kind)
			}
		})
	}
}
