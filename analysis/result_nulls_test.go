package analysis

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNullFields: the values that mean "none" are null in the JSON and come
// back from it; the others are written as they are.
func TestNullFields(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"peak of a dump without history", Peak{AllocatedBytes: 5, ReservedBytes: 7, EventIndex: -1, Phase: PhaseUnknown},
			`"reserved_bytes":7,"time_us":null,"event_index":null`},
		{"peak of a trace without reserved", Peak{AllocatedBytes: 5, TimeUS: 12, EventIndex: 0, ReservedUnknown: true},
			`"reserved_bytes":null,"time_us":12,"event_index":0`},
		{"state", State{AllocatedBytes: 1, ReservedUnknown: true}, `"allocated_bytes":1,"reserved_bytes":null`},
		{"state with 0 reserved stated", State{AllocatedBytes: 1}, `"allocated_bytes":1,"reserved_bytes":0`},
		{"span before the first event", PhaseSpan{Phase: PhaseData, Step: -1, StartEvent: -1, EndEvent: -1},
			`"step":null,"start_us":null,"end_us":null,"start_event":null,"end_event":null`},
		{"host memory", DeviceResult{Device: -1, Kind: "cpu"}, `{"device":null,"kind":"cpu"`},
		{"file-level note", Diagnostic{Kind: "no_trace", Device: -1, Message: "m"}, `{"kind":"no_trace","device":null,"message":"m"}`},
		{"device 0 note", Diagnostic{Kind: "x", Device: 0, Message: "<m>"}, `{"kind":"x","device":0,"message":"\u003cm\u003e"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), tc.want) {
				t.Errorf("%s\nlacks %s", b, tc.want)
			}
		})
	}
}

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
			r := Analyze(openShared(t, f.sub, f.name), DefaultOptions())
			r.Input.Path = "r.json" // ReadResult names the file it read
			b, err := json.MarshalIndent(r, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte(": null")) {
				t.Fatal("no null field: the file does not test the round trip")
			}
			back, err := ReadResult(bytes.NewReader(b), "r.json", SchemaID, 1<<30)
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
