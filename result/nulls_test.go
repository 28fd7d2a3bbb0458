package result

import (
	"encoding/json"
	"strings"
	"testing"
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
