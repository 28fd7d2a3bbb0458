package history

// This file builds a device's phase spans from the phase of every event:
// the runs of one phase and step, a span for each annotated phase the
// device had no event in, and autograd runs inside a forward (a jvp, not a
// backward) kept in that forward.

import (
	"math"
	"sort"

	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// buildSpans groups consecutive events of one phase and step into spans and
// measures their peaks.
func (p *Phases) buildSpans(h *History) {
	n := len(p.Code)
	for i := 0; i < n; {
		j := i
		for j+1 < n && p.Code[j+1] == p.Code[i] && p.step[j+1] == p.step[i] {
			j++
		}
		sp := result.PhaseSpan{Phase: codePhase[p.Code[i]], Step: int(p.step[i]), StartEvent: i, EndEvent: j,
			StartUS: h.TimeUS(i), EndUS: h.TimeUS(j), Events: j - i + 1}
		peak, _ := h.PeakIn(i, j)
		sp.PeakAllocatedBytes = max(sp.PeakAllocatedBytes, peak)
		p.Spans = append(p.Spans, sp)
		i = j + 1
	}
}

// phaseEnd returns the last event of the span holding event i.
func (p *Phases) phaseEnd(i int) int {
	if si := p.SpanAt(i); si >= 0 {
		return p.Spans[si].EndEvent
	}
	return i
}

// addEmptySpans adds a span for every annotated phase (an Optimizer.step,
// a zero_grad…) during which this device had no event of that phase, so
// that each step shows all its phases; spans are then ordered by time.
func (p *Phases) addEmptySpans(h *History, ivs []interval, annIdx []int32, stepIvs []interval) {
	evs := h.Device.Events
	if len(ivs) == 0 {
		return
	}
	for i := range evs {
		if !evs[i].HasTime() {
			return // no clock to place annotations on
		}
	}
	used := make([]bool, len(ivs))
	for i, ai := range annIdx {
		if ai >= 0 && p.Code[i] == ivs[ai].Code {
			used[ai] = true
		}
	}
	var extra []result.PhaseSpan
	for ai, iv := range ivs {
		if used[ai] || iv.Code == codeUnknown || iv.start == math.MinInt64 || iv.end == math.MaxInt64 {
			continue
		}
		// k: the last event before the annotation starts (events are in
		// time order on a device).
		k := sort.Search(len(evs), func(i int) bool { return evs[i].TimeNS >= iv.start }) - 1
		st := p.StepAt(max(k, 0))
		if len(stepIvs) > 0 {
			st = result.NoStep
			for _, s := range stepIvs {
				if s.start <= iv.start && iv.start <= s.end {
					st = s.step
				}
			}
		}
		extra = append(extra, result.PhaseSpan{Phase: codePhase[iv.Code], Step: st, StartUS: iv.start / 1000, EndUS: iv.end / 1000,
			StartEvent: k, EndEvent: k, PeakAllocatedBytes: h.AllocatedAt(k)})
	}
	if len(extra) == 0 {
		return
	}
	all := append(p.Spans, extra...)
	sort.SliceStable(all, func(a, b int) bool {
		if all[a].StartUS != all[b].StartUS {
			return all[a].StartUS < all[b].StartUS
		}
		return all[a].Events > all[b].Events
	})
	p.Spans = all
}

// nestAutogradInForward recodes as forward each run of backward events that
// an autograd call made inside a model's forward: the allocation before the
// run is in forward with torch.autograd.grad, jvp or torch.func in its
// stack, the allocation after it (if any) is in forward in the same call of
// the model (at any line of it), and no allocation of the run has Python
// frames (the engine's own thread: C++ frames or none; a loss.backward()
// shows its Python frames). That is not the backward of a training step:
// nesta's diffusion model takes a jvp inside forward.
func (p *Phases) nestAutogradInForward(h *History) {
	ev := h.Device.Events
	n := len(p.Code)
	sigs := newOuterSigs(h.Snap)
	prevAlloc := -1
	for i := 0; i < n; {
		if p.Code[i] != CodeBackward {
			if ev[i].Action == snapshot.ActionAlloc {
				prevAlloc = i
			}
			i++
			continue
		}
		j := i
		for j+1 < n && p.Code[j+1] == CodeBackward {
			j++
		}
		next := -1
		for k := j + 1; k < n; k++ {
			if ev[k].Action == snapshot.ActionAlloc {
				next = k
				break
			}
		}
		engineOnly := true
		for k := i; k <= j && engineOnly; k++ {
			engineOnly = ev[k].Action != snapshot.ActionAlloc || !sigs.get(ev[k].Stack).python
		}
		if engineOnly && prevAlloc >= 0 && p.Code[prevAlloc] == codeForward && h.Markers.Get(ev[prevAlloc].Stack).gradInForward &&
			(next < 0 || p.Code[next] == codeForward && sigs.get(ev[next].Stack).call == sigs.get(ev[prevAlloc].Stack).call) {
			for k := i; k <= j; k++ {
				p.Code[k] = codeForward
			}
		}
		i = j + 1
	}
}
