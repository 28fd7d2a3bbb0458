package analysis

import (
	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/result"
)

// phasePeaks finds the highest peak of each phase over all steps (the first
// event reaching it) and measures its categories and its topN sites.
func phasePeaks(h *history.History, sites *history.SiteCache, topN int) []result.PhasePeak {
	type best struct {
		value       int64
		event, step int
	}
	at := map[result.Phase]*best{}
	var order []result.Phase
	for _, sp := range h.Phases.Spans {
		v, ev := sp.PeakAllocatedBytes, sp.StartEvent
		if sp.Events > 0 {
			v, ev = h.PeakIn(sp.StartEvent, sp.EndEvent)
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
	out := make([]result.PhasePeak, 0, len(order))
	for _, ph := range order {
		b := at[ph]
		out = append(out, result.PhasePeak{Phase: ph, Step: b.step, EventIndex: b.event, TimeUS: h.TimeUS(b.event),
			AllocatedBytes: b.value, Categories: h.CategoriesAt(b.event), TopSites: h.TopSitesIn(sites, b.event, topN)})
	}
	return out
}
