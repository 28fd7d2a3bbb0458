package analysis

// PhasePeak is the highest peak of one phase over all steps: when it was,
// what filled it and which allocation sites held it. A run's phase is
// compared with the same phase of another run (check --baseline, diff), so
// that a peak moving from the optimizer step to forward is not read as
// activations growing a hundredfold.
type PhasePeak struct {
	Phase Phase `json:"phase"`
	// Step is the step of the span that peaked; −1 (null) before the first
	// step.
	Step int `json:"step" null:"-1"`
	// EventIndex is the first event reaching the peak (for a phase without
	// events on this device, the last event before it; −1: none).
	EventIndex     int        `json:"event_index" null:"-1"`
	TimeUS         int64      `json:"time_us" null:"0"`
	AllocatedBytes int64      `json:"allocated_bytes"`
	Categories     Categories `json:"categories"`
	// TopSites are the sites live at the peak, largest first.
	TopSites []Site `json:"top_sites"`
}

// phasePeaks finds the highest peak of each phase over all steps (the first
// event reaching it) and measures its categories and its topN sites.
func (h *History) phasePeaks(sites *siteCache, topN int) []PhasePeak {
	type best struct {
		value       int64
		event, step int
	}
	at := map[Phase]*best{}
	var order []Phase
	for _, sp := range h.Phases.Spans {
		v, ev := sp.PeakAllocatedBytes, sp.StartEvent
		if sp.Events > 0 {
			v, ev = h.peakIn(sp.StartEvent, sp.EndEvent)
		}
		b := at[sp.Phase]
		if b == nil {
			order = append(order, sp.Phase)
			at[sp.Phase] = &best{v, ev, sp.Step}
			continue
		}
		if v > b.value {
			*b = best{v, ev, sp.Step}
		}
	}
	out := make([]PhasePeak, 0, len(order))
	for _, ph := range order {
		b := at[ph]
		out = append(out, PhasePeak{Phase: ph, Step: b.step, EventIndex: b.event, TimeUS: h.TimeUS(b.event),
			AllocatedBytes: b.value, Categories: h.CategoriesAt(b.event), TopSites: h.topSites(sites, b.event, topN)})
	}
	return out
}

// PhasePeakOf returns the device's peak of phase ph, or nil when the device
// has no such phase or its analysis predates phase peaks.
func (d *DeviceResult) PhasePeakOf(ph Phase) *PhasePeak {
	for i := range d.PhasePeaks {
		if d.PhasePeaks[i].Phase == ph {
			return &d.PhasePeaks[i]
		}
	}
	return nil
}

// MarshalJSON writes the phase peak, event_index and time_us null when it
// has none.
func (p PhasePeak) MarshalJSON() ([]byte, error) {
	type plain PhasePeak
	return marshalNulls(plain(p))
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (p *PhasePeak) UnmarshalJSON(b []byte) error {
	type plain PhasePeak
	return unmarshalNulls(b, (*plain)(p))
}
