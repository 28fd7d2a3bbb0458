package suggest

import "github.com/torchmem/torchmem/result"

// Each suggestion states one saving, the what-if's for the same change:
// the peak of the run's curves under the technique, against the measured
// peak. A suggestion the what-if finds to save nothing that matters is
// dropped; the rest are ranked again by the savings the what-if found.

// ReconcileSavings sets each suggestion's saving to the what-if's for the
// same change (where the what-if projects the technique at every event)
// and drops those that would save under 1 MiB or 1% of the measured peak.
// It reports whether it dropped any.
func ReconcileSavings(r *result.Result, statesFirst bool) bool {
	w := r.WhatIf
	if w == nil {
		return false
	}
	saving := map[string]int64{}
	for _, p := range w.Suggestions {
		if p.Method == "technique" {
			saving[p.ID] = p.SavingBytes
		}
	}
	kept := r.Suggestions[:0]
	dropped := false
	for _, sg := range r.Suggestions {
		if s, ok := saving[sg.ID]; ok {
			if s < savingFloor(sg.ID, w.MeasuredPeakBytes) {
				dropped = true
				continue
			}
			sg.EstimatedSavingsBytes = s
		}
		kept = append(kept, sg)
	}
	r.Suggestions = kept
	rankSuggestions(r.Suggestions, statesFirst)
	return dropped
}
