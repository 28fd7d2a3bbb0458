package result

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
