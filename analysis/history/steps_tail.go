package history

import "github.com/torchmem/torchmem/snapshot"

// tailLoop completes the optimizer steps found with the events after the
// last one (from start on). A loop that runs the model there (an
// evaluation loop after the training loop, in the same function or not)
// gives steps of its own, numbered after the optimizer steps: its
// iterations are complete steps, compared by leak detection like the
// others. Frees alone before its first iteration belong to the last
// optimizer step; any other event before it or after its last iteration
// is a trailing part, not complete. Without such a loop, the events from
// start on are one trailing part, as the recording cut the last step short.
func tailLoop(h *History, found planFound, start int) planFound {
	n := len(h.Device.Events)
	next := len(found.steps) + 1
	f, _ := loopSteps(h, start)
	if len(f.steps) < MinLeakSteps {
		found.steps = append(found.steps, StepRange{N: next, Start: start, End: n - 1, partial: true})
		return found
	}
	first := max(f.steps[0].Start, start)
	f.steps[0].Start = first
	if start < first {
		if allocates(h, start, first-1) {
			found.steps = append(found.steps, StepRange{N: next, Start: start, End: first - 1, partial: true})
			next++
		} else {
			found.steps[len(found.steps)-1].End = first - 1
		}
	}
	found.tail = next
	for _, st := range f.steps {
		st.N = next
		found.steps = append(found.steps, st)
		next++
	}
	if last := f.steps[len(f.steps)-1].End; last < n-1 {
		found.steps = append(found.steps, StepRange{N: next, Start: last + 1, End: n - 1, partial: true})
	}
	found.evidence += ", then " + f.evidence
	found.site, found.Loop = f.site, f.Loop
	return found
}

// allocates reports whether events i…j hold an allocation.
func allocates(h *History, i, j int) bool {
	for k := i; k <= j; k++ {
		if h.Device.Events[k].Action == snapshot.ActionAlloc {
			return true
		}
	}
	return false
}
