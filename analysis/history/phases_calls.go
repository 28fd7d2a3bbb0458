package history

import "github.com/torchmem/torchmem/snapshot"

// The forward of a model that shows no nn.Module call and no forward frame
// (a model written as plain functions, def model(x, ws), or stacks of C++
// frames only), found from the call structure of a training step: between
// the end of the previous step (optimizer, zero_grad, data) and the
// step's backward, the forward is the call the step's code makes into the
// model — the call from the loop's function into another function of the
// user's that allocates the most — and what follows it up to the backward
// (the loss). The backward is known from the autograd engine's frames, or,
// when it runs without frames, from allocations without frames before the
// optimizer step; a run without either (an optimizer that needs no
// gradients) is left as it is.

// forwardByCalls recodes as forward the forward of every training step
// whose forward the frames did not mark (see above), and records the
// functions that made the calls (Phases.callers). A step's events are
// those without a phase of their own (hints: Python frames without a
// marker, or no marker at all) after an optimizer, zero_grad or data event
// and before a backward or optimizer event; resolveHints may have coded
// some of them backward (frees and frameless allocations before a
// backward), which the forward found here undoes.
func (p *Phases) forwardByCalls(h *History, hints []hint) {
	n := len(p.Code)
	weak := func(k int) bool { return hints[k] < hintInit }
	for i := 0; i < n; {
		if !weak(i) {
			i++
			continue
		}
		j := i
		for j+1 < n && weak(j+1) {
			j++
		}
		before := i == 0 || p.Code[i-1] == codeOptimizer || p.Code[i-1] == codeZeroGrad || p.Code[i-1] == codeData
		for k := i; k <= j && before; k++ {
			before = p.Code[k] != codeForward
		}
		if before && j+1 < n && (p.Code[j+1] == CodeBackward || p.Code[j+1] == codeOptimizer) {
			p.forwardInRun(h, i, j, p.Code[j+1] == CodeBackward)
		}
		i = j + 1
	}
}

// forwardInRun codes the forward of the events i…j, which end at a
// backward (backward set) or at an optimizer step.
func (p *Phases) forwardInRun(h *History, i, j int, backward bool) {
	ev := h.Device.Events
	s := h.Snap
	// last: the last allocation with frames (the loss, or the forward's end)
	last := -1
	for k := j; k >= i; k-- {
		if ev[k].Action == snapshot.ActionAlloc && len(s.StackOf(ev[k].Stack)) > 0 {
			last = k
			break
		}
	}
	if last < 0 {
		return
	}
	frameless := false // the backward's allocations, made without frames
	for k := last + 1; k <= j; k++ {
		frameless = frameless || ev[k].Action == snapshot.ActionAlloc && len(s.StackOf(ev[k].Stack)) == 0
	}
	if !backward && !frameless {
		return // no backward before the optimizer step
	}
	start, caller := modelCall(h, i, last)
	if start < 0 {
		return
	}
	for k := i; k <= j; k++ {
		switch {
		case k < start:
			p.Code[k] = codeUnknown // before the model's call: no backward
		case k <= last || !frameless:
			p.Code[k] = codeForward // frees after the loss: the forward's end
		default:
			p.Code[k] = CodeBackward
		}
	}
	if caller != (FuncKey{}) {
		if p.Callers == nil {
			p.Callers = map[FuncKey]bool{}
		}
		p.Callers[caller] = true
	}
}

// modelCall returns the first event of the model's call among the
// allocations i…last and the function that made it. With Python frames:
// following the user's frames from the outermost in while every
// allocation shares one frame, the first function whose lines differ is
// the step's code; its line that calls into another function of the
// user's and allocates the most is the model's call (−1 when no line
// calls one). Without Python frames: the first allocation that is no copy
// to the device (the batch moved before the forward).
func modelCall(h *History, i, last int) (int, FuncKey) {
	ev := h.Device.Events
	s := h.Snap
	type alloc struct {
		k      int
		frames []*snapshot.Frame // the user's frames, outermost first
	}
	var as []alloc
	for k := i; k <= last; k++ {
		if ev[k].Action != snapshot.ActionAlloc {
			continue
		}
		st := s.StackOf(ev[k].Stack)
		var fr []*snapshot.Frame
		for x := len(st) - 1; x >= 0; x-- {
			if f := &s.Frames[st[x]]; IsPython(f) && !IsLibrary(f.Filename) && !IsNoise(f) {
				fr = append(fr, f)
			}
		}
		if len(fr) > 0 {
			as = append(as, alloc{k, fr})
		}
	}
	if len(as) == 0 {
		for k := i; k <= last; k++ {
			if ev[k].Action == snapshot.ActionAlloc && len(s.StackOf(ev[k].Stack)) > 0 && !h.Markers.Get(ev[k].Stack).toDevice {
				return k, FuncKey{}
			}
		}
		return -1, FuncKey{}
	}
	// d: the depth of the step's code, where the allocations part
	d := 0
	for ; ; d++ {
		same := true
		for _, a := range as {
			same = same && d+1 < len(a.frames) && *a.frames[d] == *as[0].frames[d]
		}
		if !same {
			break
		}
	}
	fn := FuncKey{as[0].frames[min(d, len(as[0].frames)-1)].Filename, as[0].frames[min(d, len(as[0].frames)-1)].Name}
	bytes := map[int64]int64{}
	first := map[int64]int{}
	for _, a := range as {
		if d+1 >= len(a.frames) || (FuncKey{a.frames[d].Filename, a.frames[d].Name}) != fn {
			continue // no call from the step's code
		}
		line := a.frames[d].Line
		if _, ok := first[line]; !ok {
			first[line] = a.k
		}
		bytes[line] += ev[a.k].Size
	}
	best, bv := int64(0), int64(-1)
	for line, b := range bytes {
		if b > bv || b == bv && first[line] < first[best] {
			best, bv = line, b
		}
	}
	if bv < 0 {
		return -1, FuncKey{}
	}
	return first[best], fn
}
