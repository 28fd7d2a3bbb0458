package analysis

import (
	"fmt"
	"strings"

	"github.com/torchmem/torchmem/snapshot"
)

// readerDiagnostics carries over what the reader found.
func readerDiagnostics(s *snapshot.Snapshot) []Diagnostic {
	out := make([]Diagnostic, 0, len(s.Diagnostics))
	for _, d := range s.Diagnostics {
		out = append(out, Diagnostic{Kind: d.Kind, Device: d.Device, Message: d.Message})
	}
	return out
}

// deviceDiagnostics says plainly how far to trust one device's numbers.
func deviceDiagnostics(h *History, dr *DeviceResult) []Diagnostic {
	id := h.Device.ID
	out := append(h.replayDiagnostics(), h.diags...)
	if len(h.Device.Events) == 0 {
		out = append(out, Diagnostic{Kind: "state_only", Device: id, Message: fmt.Sprintf(
			"device %d: no allocation history, only the state at the dump: at_end is exact, the peak is the dump itself, and there are no phases; categories come from block frames alone", id)})
		return out
	}
	if len(h.Phases.Sources) == 1 && h.Phases.Sources[0] == "none" {
		out = append(out, Diagnostic{Kind: "no_phases", Device: id, Message: fmt.Sprintf(
			"device %d: no annotation, autograd thread or stack frame says which phase an event belongs to: phases are unknown and categories rest on lifetimes only", id)})
	}
	// How much of the end state rests on low-confidence rules.
	var low, all int64
	for _, r := range dr.Rules {
		all += r.Bytes
		if r.Confidence == Low {
			low += r.Bytes
		}
	}
	if all > 0 && low*10 >= all {
		var rules []string
		for _, r := range dr.Rules {
			if r.Confidence == Low && r.Bytes*20 >= all {
				rules = append(rules, fmt.Sprintf("%s %s", r.Rule, fmtBytes(r.Bytes)))
			}
		}
		out = append(out, Diagnostic{Kind: "low_confidence_categories", Device: id, Message: fmt.Sprintf(
			"device %d: %.0f%% of the bytes at the end were classified by low-confidence rules (%s): treat those categories as guesses", id, pct(low, all), strings.Join(rules, ", "))})
	}
	return out
}
