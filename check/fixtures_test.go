package check

import "github.com/torchmem/torchmem/result"

// checkDev is a device of a run to check: its peak and end, the peak's
// categories, phases and sites.
func checkDev(id int, peak, end int64, peakCats result.Categories, phases []result.PhaseSpan, sites []result.Site) result.DeviceResult {
	return result.DeviceResult{Device: id, Kind: "cuda",
		AtEnd:  result.State{AllocatedBytes: end, ReservedBytes: end + 100},
		Peak:   result.Peak{AllocatedBytes: peak, ReservedBytes: peak + 100, Phase: result.PhaseForward, Step: 1, Categories: peakCats},
		Phases: phases, TopSites: sites}
}

// checkSpan is a phase span of a step with its peak.
func checkSpan(ph result.Phase, step int, peak int64) result.PhaseSpan {
	return result.PhaseSpan{Phase: ph, Step: step, PeakAllocatedBytes: peak}
}
