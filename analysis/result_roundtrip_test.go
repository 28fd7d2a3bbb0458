package analysis

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/result"
)

// TestResultJSONRoundTrip: a result written as JSON, read back (a
// baseline) and written again is the same JSON, on files with null fields —
// host memory and no reserved figure (kineto 2021), a dump without history
// (yiyi 1.3b), an OOM (nesta): the values that mean "none" come back as
// such, or the second writing would say 0 or −1 where the first said null.
func TestResultJSONRoundTrip(t *testing.T) {
	for _, f := range []struct{ sub, name string }{
		{"traces", "kineto_resnet50_legacy_v100.json.gz"},
		{"snapshots", "genA_torch2.0_yiyi_1.3b_snapshot.pickle"},
		{"snapshots", "genC_torch2.2_nesta_OOM_pickle_named_json.pickle"},
	} {
		t.Run(f.name, func(t *testing.T) {
			r := Analyze(analysistest.OpenShared(t, f.sub, f.name), DefaultOptions())
			r.Input.Path = "r.json" // ReadResult names the file it read
			b, err := json.MarshalIndent(r, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte(": null")) {
				t.Fatal("no null field: the file does not test the round trip")
			}
			back, err := result.ReadResult(bytes.NewReader(b), "r.json", result.SchemaID, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			again, err := json.MarshalIndent(back, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(b), string(again)); diff != "" {
				t.Errorf("written again (-first +second):\n%s", diff)
			}
		})
	}
}
