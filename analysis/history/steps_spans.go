package history

import (
	"sort"

	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// spanSteps cuts steps at annotation spans when no event falls inside them
// (a chrome trace's CPU memory, or a device whose allocations all happen
// outside the annotated ranges): at the end of every Optimizer.step#… range,
// else at the start of every forward span (trace spans of the root module,
// CompiledFunction, ## forward ##). Events must carry times in order.
func spanSteps(h *History) planFound {
	ev := h.Device.Events
	if len(ev) == 0 {
		return planFound{}
	}
	for i := range ev {
		if !ev[i].HasTime() || i > 0 && ev[i].TimeNS < ev[i-1].TimeNS {
			return planFound{}
		}
	}
	var optEnds, fwdStarts []int64
	for _, a := range h.Snap.Annotations {
		if a.Device != -1 && a.Device != h.Device.ID {
			continue
		}
		switch {
		case a.Kind == snapshot.AnnotationOptStep && a.EndNS != snapshot.NoTime:
			optEnds = append(optEnds, a.EndNS)
		case a.Kind == snapshot.AnnotationForward && a.StartNS != snapshot.NoTime:
			fwdStarts = append(fwdStarts, a.StartNS)
		}
	}
	sort.Slice(optEnds, func(a, b int) bool { return optEnds[a] < optEnds[b] })
	sort.Slice(fwdStarts, func(a, b int) bool { return fwdStarts[a] < fwdStarts[b] })
	// first event after time t (or at it, when atStart)
	after := func(t int64, atStart bool) int {
		return sort.Search(len(ev), func(i int) bool {
			if atStart {
				return ev[i].TimeNS >= t
			}
			return ev[i].TimeNS > t
		})
	}
	plan := planFound{source: result.StepsFromAnnotations}
	switch {
	case len(optEnds) >= MinLeakSteps:
		plan.evidence = "Optimizer.step ranges"
		start := 0
		for _, t := range optEnds {
			end := after(t, false) - 1
			if end >= start {
				plan.steps = append(plan.steps, StepRange{N: len(plan.steps) + 1, Start: start, End: end})
			}
			start = max(start, end+1)
		}
	case len(fwdStarts) >= MinLeakSteps:
		plan.evidence = "forward spans"
		for k, t := range fwdStarts {
			start := after(t, true)
			end := len(ev) - 1
			if k+1 < len(fwdStarts) {
				end = after(fwdStarts[k+1], true) - 1
			}
			if end >= start {
				plan.steps = append(plan.steps, StepRange{N: len(plan.steps) + 1, Start: start, End: end})
			}
		}
	}
	return plan
}
