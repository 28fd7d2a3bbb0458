package history

import (
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// MinLeakSteps is how many complete steps a run needs before its steps are
// compared (and leaks looked for) at all.
const MinLeakSteps = 4

// StepRange is one step as a pass over the events sees it: events start…end,
// both included.
type StepRange struct {
	N          int
	Start, End int
	partial    bool
}

// planFound is what one source of boundaries found.
type planFound struct {
	source   result.StepSource
	evidence string
	site     string
	Loop     FuncKey // the loop frame's function (source loop)
	tail     int     // the first step of a loop after the optimizer steps
	steps    []StepRange
}

// StepPlan is a device's StepPlan (History.Steps) and what leak detection
// needs of it besides, which is not part of the JSON.
type StepPlan struct {
	*result.StepPlan
	// Loop is the function of the loop frame when Source is "loop".
	Loop FuncKey
	// tail is the number of the first step of a loop that follows the
	// optimizer steps (tailLoop), 0 when none: leak detection compares the
	// steps before it and those from it on apart.
	tail int
}

// computeSteps divides the events of h into steps, from the best source
// that has any: ProfilerStep#N ranges; optimizer steps (the phases must be
// set); a trace's Optimizer.step ranges or forward spans; the loop frame of
// the Python stacks; without Python frames, a training step's backward runs
// or parameter sweeps (patternSteps); the period of allocation sites (not
// when the stacks show loops that may be the model's layers: see loopSteps). It fills the step of
// every event (NoStep outside ProfilerStep ranges, 0 outside the steps of
// the other sources) and returns the plan; the spans' memory is measured
// by buildSpans. With step annotations, p.step holds the innermost step
// interval of each event when it is called (computePhases finds them).
func computeSteps(h *History, stepIvs []interval) *StepPlan {
	p := h.Phases
	n := len(p.Code)
	if len(stepIvs) == 0 {
		for i := range p.step {
			p.step[i] = 0
		}
	}
	plan := &StepPlan{StepPlan: &result.StepPlan{Source: result.StepsNone, Evidence: "nothing tells steps apart", FirstEvents: []int{}, Spans: []result.StepSpan{}}}
	var found planFound
	switch {
	case len(stepIvs) > 0:
		// The innermost step interval of each event, then its step, in place.
		for i, si := range p.step {
			if si >= 0 {
				p.step[i] = int32(stepIvs[si].step)
			} else {
				p.step[i] = result.NoStep
			}
		}
		found = planFound{source: result.StepsFromAnnotations, evidence: "ProfilerStep#N annotations"}
		for i := 0; i < n; {
			if p.step[i] == result.NoStep {
				i++
				continue
			}
			j := i
			for j+1 < n && p.step[j+1] == p.step[i] {
				j++
			}
			found.steps = append(found.steps, StepRange{N: int(p.step[i]), Start: i, End: j})
			i = j + 1
		}
		plan.fill(found)
		return plan
	}
	if ends := optimizerEnds(p.Code); len(ends) > 0 {
		found = planFound{source: result.StepsFromOptimizer, evidence: "optimizer steps"}
		start := 0
		for k, e := range ends {
			found.steps = append(found.steps, StepRange{N: k + 1, Start: start, End: e})
			start = e + 1
		}
		if start < n {
			found = tailLoop(h, found, start)
		}
	} else if f := spanSteps(h); len(f.steps) >= MinLeakSteps {
		found = f
	} else if f, ambiguous := loopSteps(h, 0); len(f.steps) > 0 || ambiguous {
		found = f
	} else if f := patternSteps(h); len(f.steps) > 0 {
		found = f
	} else {
		found = periodSteps(h)
	}
	if len(found.steps) == 0 {
		if found.evidence != "" {
			plan.Evidence = found.evidence
		}
		return plan
	}
	for _, st := range found.steps {
		for i := st.Start; i <= st.End && i < n; i++ {
			p.step[i] = int32(st.N)
		}
	}
	plan.fill(found)
	return plan
}

// fill copies what a source found into the plan (memory comes later).
func (plan *StepPlan) fill(f planFound) {
	plan.Source, plan.Evidence, plan.Site, plan.Loop, plan.tail = f.source, f.evidence, f.site, f.Loop, f.tail
	for _, st := range f.steps {
		plan.FirstEvents = append(plan.FirstEvents, st.Start)
		plan.Spans = append(plan.Spans, result.StepSpan{Step: st.N, StartEvent: st.Start, EndEvent: st.End, Complete: !st.partial})
	}
}

// measureSteps measures the time and memory of every step of the plan.
func (h *History) measureSteps() {
	for k := range h.Steps.Spans {
		st := &h.Steps.Spans[k]
		i, j := st.StartEvent, st.EndEvent
		st.StartUS, st.EndUS = h.TimeUS(i), h.TimeUS(j)
		st.StartAllocatedBytes, st.EndAllocatedBytes = h.AllocatedAt(i-1), h.AllocatedAt(j)
		st.PeakAllocatedBytes, st.PeakEvent = h.PeakIn(i, j)
	}
}

// completeSteps returns the complete steps of the plan, for passes that
// compare steps (leak detection).
func (plan *StepPlan) completeSteps() []StepRange {
	var out []StepRange
	for _, st := range plan.Spans {
		if st.Complete {
			out = append(out, StepRange{N: st.Step, Start: st.StartEvent, End: st.EndEvent})
		}
	}
	return out
}

// StepGroups returns the complete steps in the groups leak detection
// compares apart: the optimizer steps and the iterations of a loop after
// them (an evaluation after the training), or all of them.
func (plan *StepPlan) StepGroups() [][]StepRange {
	all := plan.completeSteps()
	for k, st := range all {
		if plan.tail > 0 && st.N >= plan.tail {
			return [][]StepRange{all[:k], all[k:]}
		}
	}
	return [][]StepRange{all}
}

// optimizerEnds returns the event index ending each optimizer step: the last
// event of each run of optimizer events (runs separated only by unknown
// events are one step).
func optimizerEnds(code []uint8) []int {
	var ends []int
	in := false
	last := -1
	for i, c := range code {
		switch c {
		case codeOptimizer:
			in = true
			last = i
		case codeUnknown:
		default:
			if in {
				ends = append(ends, last)
				in = false
			}
		}
	}
	if in {
		ends = append(ends, last)
	}
	return ends
}

// loopSite names a loop frame: the function's file, the first line of the
// loop body and the function ("eval.py:38 evaluate").
func loopSite(fn FuncKey, head int64) string {
	f := snapshot.Frame{Filename: fn.File, Line: head, Name: fn.Name}
	return FrameString(&f)
}

// FuncKey is a Python function: its file and name.
type FuncKey struct{ File, Name string }
