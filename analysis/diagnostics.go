package analysis

import (
	"fmt"
	"strings"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// readerDiagnostics carries over what the reader found.
func readerDiagnostics(s *snapshot.Snapshot) []result.Diagnostic {
	out := make([]result.Diagnostic, 0, len(s.Diagnostics))
	for _, d := range s.Diagnostics {
		out = append(out, result.Diagnostic{Kind: d.Kind, Device: d.Device, Message: d.Message})
	}
	return out
}

// deviceDiagnostics says plainly how far to trust one device's numbers.
func deviceDiagnostics(h *history.History, dr *result.DeviceResult) []result.Diagnostic {
	id := h.Device.ID
	out := append(h.ReplayDiagnostics(), h.Diags...)
	out = append(out, history.KindsDiagnostics(id, dr.Rules)...)
	if len(h.Device.Events) == 0 {
		out = append(out, result.Diagnostic{Kind: "state_only", Device: id, Message: fmt.Sprintf(
			"device %d: no allocation history, only the state at the dump: at_end is exact, the peak is the dump itself, and there are no phases; categories come from block frames alone", id)})
		return out
	}
	stateOnly := h.Snap.Recording == snapshot.RecordingState
	d := h.Device
	if len(d.Segments) == 0 && d.Baseline < 0 && d.Kind != snapshot.DeviceCPU && h.Snap.Source.Format != snapshot.FormatSnapshotPickle {
		out = append(out, result.Diagnostic{Kind: "baseline_unknown", Device: id, Message: fmt.Sprintf(
			"device %d: the file does not say how much was allocated before its first event: allocated bytes count from 0 at the start and miss everything older", id)})
	}
	if h.PreFreed > 0 && len(d.Events) >= 10000 && len(d.Events)%1000 == 0 {
		out = append(out, result.Diagnostic{Kind: "ring_buffer_overflow_suspected", Device: id, Message: fmt.Sprintf(
			"device %d: exactly %d trace entries and %d frees without an allocation: the ring buffer (max_entries) probably overflowed and dropped the oldest events; raise max_entries", id, len(d.Events), h.PreFreed)})
	}
	if !stateOnly && len(h.Phases.Sources) == 1 && h.Phases.Sources[0] == "none" {
		out = append(out, result.Diagnostic{Kind: "no_phases", Device: id, Message: fmt.Sprintf(
			"device %d: no annotation, autograd thread or stack frame says which phase an event belongs to: phases are unknown and categories rest on lifetimes only", id)})
	}
	if d, ok := history.AutocastDiagnostic(h, dr.Peak.EventIndex); ok {
		out = append(out, d)
	}
	if d, ok := history.GraphPoolDiagnostic(h); ok {
		out = append(out, d)
	}
	// How much of the end state rests on low-confidence rules.
	var low, all int64
	for _, r := range dr.Rules {
		all += r.Bytes
		if r.Confidence == result.Low {
			low += r.Bytes
		}
	}
	var high, medium int64
	for _, r := range dr.Rules {
		switch r.Confidence {
		case result.High:
			high += r.Bytes
		case result.Medium:
			medium += r.Bytes
		}
	}
	curves := fmt.Sprintf("curves replayed from %d events", len(d.Events))
	if len(d.Events) == 1 {
		curves = "curves replayed from 1 event"
	}
	switch {
	case stateOnly:
		curves = "only the state at the dump is known (at_end exact; no peak history)"
	case h.Anonymous > 0:
		curves += " (exact totals; lifetimes paired by size)"
	case h.LiveNotInDump > 0 || h.Reuse > 0 || h.ReservedClamped:
		curves += " (inconsistencies found: approximate)"
	case len(d.Segments) > 0:
		curves += ", consistent with the dump"
	}
	if all > 0 {
		out = append(out, result.Diagnostic{Kind: "trust", Device: id, Message: fmt.Sprintf(
			"device %d: %s; phases from %s; categories at the end: %.0f%% high, %.0f%% medium, %.0f%% low confidence", id, curves,
			strings.Join(h.Phases.Sources, ", "), units.Percent(high, all), units.Percent(medium, all), units.Percent(low, all))})
	}
	if all > 0 && low*10 >= all {
		var rules []string
		for _, r := range dr.Rules {
			if r.Confidence == result.Low && r.Bytes*20 >= all {
				rules = append(rules, fmt.Sprintf("%s %s", r.Rule, units.FormatBytes(r.Bytes)))
			}
		}
		out = append(out, result.Diagnostic{Kind: "low_confidence_categories", Device: id, Message: fmt.Sprintf(
			"device %d: %.0f%% of the bytes at the end were classified by low-confidence rules (%s): treat those categories as guesses", id, units.Percent(low, all), strings.Join(rules, ", "))})
	}
	return out
}
