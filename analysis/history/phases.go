package history

import (
	"math"
	"regexp"
	"sort"
	"strconv"
	"sync"

	"github.com/torchmem/torchmem/internal/beside"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// phase codes, the compact per-event form of Phase.
const (
	codeUnknown uint8 = iota
	codeForward
	CodeBackward
	codeOptimizer
	codeZeroGrad
	codeData
)

var codePhase = [...]result.Phase{result.PhaseUnknown, result.PhaseForward, result.PhaseBackward, result.PhaseOptimizer, result.PhaseZeroGrad, result.PhaseData}

func hintCode(h hint) uint8 {
	switch h {
	case hintForward:
		return codeForward
	case hintBackward:
		return CodeBackward
	case hintOptimizer:
		return codeOptimizer
	case hintZeroGrad:
		return codeZeroGrad
	case hintData:
		return codeData
	}
	return codeUnknown
}

// Phases is the phase and step of every event of one device and the phase
// spans. Steps come from the step pass (History.Steps): a ProfilerStep#N
// range's events are step N (events outside them NoStep); the steps of the
// other sources are numbered from 1 in the file (events outside them 0);
// without steps every event is step 0.
type Phases struct {
	Code []uint8
	// step is the step of every event while the phases are computed; then
	// steps replace it, and spanOrder indexes the spans (a few entries for
	// a run of millions of events).
	step      []int32
	steps     []stepRun // the runs of events of one step, in event order
	spanOrder []int32   // the spans with events, by their first event
	Spans     []result.PhaseSpan
	// Sources says what the phases were derived from ("annotations",
	// "frames", "autograd threads", "lifetimes").
	Sources []string
	// Callers are the functions that called a model found by its calls
	// (forwardByCalls): the step's code, whose line names the forward.
	Callers map[FuncKey]bool
}

// At returns the phase of event i.
func (p *Phases) At(i int) result.Phase {
	if i < 0 || i >= len(p.Code) {
		return result.PhaseUnknown
	}
	return codePhase[p.Code[i]]
}

// stepRun is a run of consecutive events of one step, from event start.
type stepRun struct{ start, step int32 }

// StepAt returns the step of event i.
func (p *Phases) StepAt(i int) int {
	if p.step != nil || len(p.steps) == 0 {
		if i < 0 || i >= len(p.step) {
			if i < 0 && len(p.step) > 0 {
				return int(p.step[0])
			}
			return 0
		}
		return int(p.step[i])
	}
	if i >= len(p.Code) {
		return 0
	}
	k := sort.Search(len(p.steps), func(k int) bool { return int(p.steps[k].start) > i }) - 1
	return int(p.steps[max(k, 0)].step)
}

// SpanAt returns the index in Spans of the span holding event i (−1).
func (p *Phases) SpanAt(i int) int {
	if i < 0 || i >= len(p.Code) {
		return -1
	}
	o := p.spanOrder
	k := sort.Search(len(o), func(k int) bool { return p.Spans[o[k]].StartEvent > i }) - 1
	if k < 0 || p.Spans[o[k]].EndEvent < i {
		return -1
	}
	return int(o[k])
}

// spanCursor answers SpanAt for events asked in increasing order, moving
// forward through the spans instead of searching them each time.
type spanCursor struct {
	p *Phases
	k int // the spans (by first event) that start at or before the last event asked
}

// at is p.SpanAt(i); i must not be below the event asked before.
func (c *spanCursor) at(i int) int {
	p := c.p
	if i < 0 || i >= len(p.Code) {
		return -1
	}
	o := p.spanOrder
	for c.k < len(o) && p.Spans[o[c.k]].StartEvent <= i {
		c.k++
	}
	if k := c.k - 1; k >= 0 && p.Spans[o[k]].EndEvent >= i {
		return int(o[k])
	}
	return -1
}

// compact replaces the step of every event by its runs and indexes the
// spans by their first event, once both are final (StepAt and SpanAt).
func (p *Phases) compact() {
	for i, st := range p.step {
		if i == 0 || st != p.step[i-1] {
			p.steps = append(p.steps, stepRun{int32(i), st})
		}
	}
	for si, sp := range p.Spans {
		if sp.Events > 0 {
			p.spanOrder = append(p.spanOrder, int32(si))
		}
	}
	sort.Slice(p.spanOrder, func(a, b int) bool {
		return p.Spans[p.spanOrder[a]].StartEvent < p.Spans[p.spanOrder[b]].StartEvent
	})
	p.step = nil
}

var stepRE = regexp.MustCompile(`ProfilerStep\s*#\s*(\d+)`)

// interval is an annotation range in nanoseconds.
type interval struct {
	start, end int64
	Code       uint8
	step       int
}

// AnnIntervals are a snapshot's annotation intervals: they are the same for
// each of its devices, and computing them per device made the work of a
// file grow with the square of its devices.
type AnnIntervals struct {
	once          sync.Once
	phases, steps []interval
}

// of returns the intervals of s, computed on first use.
func (a *AnnIntervals) of(s *snapshot.Snapshot) (phases, steps []interval) {
	a.once.Do(func() { a.phases, a.steps = annotationIntervals(s) })
	return a.phases, a.steps
}

func annotationIntervals(s *snapshot.Snapshot) (phases, steps []interval) {
	for _, a := range s.Annotations {
		iv := interval{start: a.StartNS, end: a.EndNS}
		if iv.start == snapshot.NoTime {
			iv.start = math.MinInt64
		}
		if iv.end == snapshot.NoTime {
			iv.end = math.MaxInt64
		}
		switch a.Kind {
		case snapshot.AnnotationStep:
			if m := stepRE.FindStringSubmatch(a.Name); m != nil {
				if n, err := strconv.Atoi(m[1]); err == nil {
					iv.step = n
					steps = append(steps, iv)
				}
			}
			continue
		case snapshot.AnnotationForward:
			iv.Code = codeForward
		case snapshot.AnnotationBackward:
			iv.Code = CodeBackward
		case snapshot.AnnotationOptStep:
			iv.Code = codeOptimizer
		case snapshot.AnnotationZeroGrad:
			iv.Code = codeZeroGrad
		case snapshot.AnnotationData:
			iv.Code = codeData
		default:
			continue
		}
		phases = append(phases, iv)
	}
	return phases, steps
}

// innermost finds, for every event, the shortest interval containing its
// time (−1 when none), by a sweep in time order. It writes them into out
// (one an event), which the caller may reuse: the step pass writes them
// where the steps go.
func innermost(events []snapshot.Event, ivs []interval, out []int32) []int32 {
	for i := range out {
		out[i] = -1
	}
	if len(ivs) == 0 {
		return out
	}
	// A device's events are in time order: sort them only when they are
	// not (the sort costs more than the sweep, and a copy of the indexes).
	var order []int32
	last := int64(math.MinInt64)
	for i := range events {
		if t := events[i].TimeNS; events[i].HasTime() {
			if t < last {
				order = make([]int32, 0, len(events))
				break
			}
			last = t
		}
	}
	if order != nil {
		for i := range events {
			if events[i].HasTime() {
				order = append(order, int32(i))
			}
		}
		sort.SliceStable(order, func(a, b int) bool { return events[order[a]].TimeNS < events[order[b]].TimeNS })
	}
	byStart := make([]int, len(ivs))
	for i := range byStart {
		byStart[i] = i
	}
	sort.SliceStable(byStart, func(a, b int) bool { return ivs[byStart[a]].start < ivs[byStart[b]].start })
	var active []int
	next := 0
	for k := 0; k < len(events); k++ {
		ei := int32(k)
		if order != nil {
			if k >= len(order) {
				break
			}
			ei = order[k]
		} else if !events[k].HasTime() {
			continue
		}
		t := events[ei].TimeNS
		for next < len(byStart) && ivs[byStart[next]].start <= t {
			active = append(active, byStart[next])
			next++
		}
		best := -1
		keep := active[:0]
		for _, ai := range active {
			iv := ivs[ai]
			if iv.end < t {
				continue
			}
			keep = append(keep, ai)
			if best < 0 || uint64(iv.end-iv.start) < uint64(ivs[best].end-ivs[best].start) {
				best = ai
			}
		}
		active = keep
		out[ei] = int32(best)
	}
	return out
}

// ComputePhases derives the phase and step of every event of h from
// annotations, autograd threads and stack frames, then fills the gaps from
// the order of phases: events without frames after the last forward
// allocation and before the optimizer are backward when an allocation
// among them has no frames (the autograd engine runs backward in C++
// threads that have no Python frames); frees alone after a forward end the
// forward (the last outputs of an evaluation loop, an OutOfMemoryError
// unwinding): they are not a backward. The autograd engine's work
// for a call made inside a model's forward (torch.autograd.grad, jvp,
// torch.func) is forward. Then the step pass divides the events into steps
// (History.Steps).
func ComputePhases(h *History) *Phases {
	return computePhases(h, nil, func() {})
}

// frameHints is the markers' hint of the stack of every event of h, which
// computePhases starts from: it needs only the events and the stacks, and
// BuildWithAnnotations finds it while the replay runs.
func frameHints(h *History) []hint {
	ev := h.Device.Events
	out := make([]hint, len(ev))
	for i := range ev {
		out[i] = h.Markers.Get(ev[i].Stack).Hint
	}
	return out
}

// computePhases is ComputePhases from the events' frameHints, or with
// pre nil, looking the markers up itself. It writes its hints over pre.
// The replay may still be sizing the blocks and making the allocated
// curve when it is called: the passes up to the steps read neither, and
// it calls waitReplay before the first that does.
func computePhases(h *History, pre []hint, waitReplay func()) *Phases {
	return startPhases(h, pre, freesCarryAllocStacks(h)).finish(h, waitReplay)
}

// phaseStart is what the phase passes find from the events, the
// annotations and the stacks alone, before any pass reads a block: each
// event's hint and its resolved phase code. BuildWithAnnotations finds it
// on the other core while the events are paired.
type phaseStart struct {
	p                 *Phases
	phaseIvs, stepIvs []interval
	// annIdx is the innermost annotated phase of each event: nil without
	// annotations, sparing four bytes an event.
	annIdx []int32
	hints  []hint
	// freeFrames is whether frees' frames were taken for their
	// allocation's (freesCarryAllocStacks), as the hints were found.
	freeFrames bool
}

// startPhases finds the hints of h's events and resolves them into
// phase codes, with frees' frames counted as their allocation's when
// freeFrames is set. It reads the events, the annotations and the stacks
// (pre: the events' frameHints, written over; nil: the markers looked
// up here), never a block.
func startPhases(h *History, pre []hint, freeFrames bool) *phaseStart {
	s, d := h.Snap, h.Device
	n := len(d.Events)
	st := &phaseStart{p: &Phases{Code: make([]uint8, n)}, freeFrames: freeFrames}
	p := st.p
	ann := h.ann
	if ann == nil {
		ann = &AnnIntervals{}
	}
	st.phaseIvs, st.stepIvs = ann.of(s)
	phaseIvs := st.phaseIvs
	var annIdx []int32
	if len(phaseIvs) > 0 {
		annIdx = innermost(d.Events, phaseIvs, make([]int32, n))
	}
	st.annIdx = annIdx

	hints := pre
	if hints == nil {
		hints = make([]hint, n)
	}
	st.hints = hints
	usedAnn, usedFrames, usedThreads := false, false, false
	for i := range d.Events {
		e := &d.Events[i]
		var fh hint
		isFree := e.Action == snapshot.ActionFreeRequested || e.Action == snapshot.ActionFreeCompleted
		switch {
		case isFree && freeFrames:
			// Frees carry the block's allocation stack unless recorded
			// with context="all": then their frames say nothing about
			// when they happened.
		case pre != nil:
			fh = pre[i]
		default:
			fh = h.Markers.Get(e.Stack).Hint
		}
		var ah hint
		if annIdx != nil && annIdx[i] >= 0 {
			ah = codeHint(phaseIvs[annIdx[i]].Code)
		}
		th := hintNone
		if int(e.Thread) < len(s.Threads) && e.Thread != 0 && s.Threads[e.Thread].Autograd {
			th = hintBackward
		}
		switch {
		case ah == hintOptimizer && (fh == hintForward || fh == hintBackward):
			hints[i] = fh // forward/backward inside an optimizer closure (Lightning)
			usedFrames = true
		case ah != hintNone:
			hints[i] = ah
			usedAnn = true
		case th != hintNone:
			hints[i] = th
			usedThreads = true
		default:
			hints[i] = fh
			if fh > HintUser {
				usedFrames = true
			}
		}
	}
	resolveHints(hints, d.Events, phaseIvs, p.Code)
	for _, src := range []struct {
		used bool
		name string
	}{{usedAnn, "annotations"}, {usedThreads, "autograd threads"}, {usedFrames, "frames"}} {
		if src.used {
			p.Sources = append(p.Sources, src.name)
		}
	}
	return st
}

// finish runs the phase passes that read the blocks, then the steps' and
// the spans', and makes the phases h's.
func (st *phaseStart) finish(h *History, waitReplay func()) *Phases {
	d, p := h.Device, st.p
	h.Phases = p
	// The innermost step annotation of each event, where the steps go:
	// it needs only the events, and is found on the other core while the
	// passes below run (the step pass reads it, none before it does). It is
	// not found beside the pairing with the phases' index: the other core
	// has that one's work and the hints' there, as long as the pairing.
	p.step = make([]int32, len(d.Events))
	waitSteps := func() {}
	if len(st.stepIvs) > 0 {
		waitSteps = beside.Go(func() { innermost(d.Events, st.stepIvs, p.step) })
	}
	p.nestAutogradInForward(h)
	p.forwardByCalls(h, st.hints)
	if len(p.Sources) == 0 {
		p.Sources = []string{"none"}
	}

	// Steps: one pass, read by every other (phases, leaks, diff, roll-up).
	waitSteps()
	waitReplay()
	h.Steps = computeSteps(h, st.stepIvs)
	// The phase spans' peaks and the steps' are each a pass over the
	// curve, and write apart: the steps' are measured on the other core.
	waitMeasured := beside.Go(h.measureSteps)
	p.buildSpans(h)
	waitMeasured()
	p.addEmptySpans(h, st.phaseIvs, st.annIdx, st.stepIvs)
	p.compact()
	return p
}

// framelessAllocs reports whether any of events (with their hints) is an
// allocation without frames.
func framelessAllocs(hints []hint, events []snapshot.Event) bool {
	for i, h := range hints {
		if h == hintNone && events[i].Action == snapshot.ActionAlloc {
			return true
		}
	}
	return false
}

func codeHint(c uint8) hint {
	switch c {
	case codeForward:
		return hintForward
	case CodeBackward:
		return hintBackward
	case codeOptimizer:
		return hintOptimizer
	case codeZeroGrad:
		return hintZeroGrad
	case codeData:
		return hintData
	}
	return hintNone
}

// freesCarryAllocStacks reports whether the frees of this trace carry their
// block's allocation stack (context="alloc"/"state") rather than the stack
// of the free (context="all").
func freesCarryAllocStacks(h *History) bool {
	same, diff := 0, 0
	for i := range h.Blocks {
		b := &h.Blocks[i]
		if b.Alloc < 0 || b.Free < 0 || b.Stack == 0 || b.FreeStack == 0 {
			continue
		}
		if b.Stack == b.FreeStack {
			same++
		} else {
			diff++
		}
	}
	return carriesAllocStacks(same, diff)
}

// carriesAllocStacks is the rule of freesCarryAllocStacks: of the freed
// blocks with both stacks, same had their free's stack equal to their
// allocation's and diff did not.
func carriesAllocStacks(same, diff int) bool { return same > 0 && same >= 9*diff }

// annCursor finds, for a time, the first of the annotations by end that
// ends at or after it and the first of those by start that starts after
// it. A device's events come in time order: the cursors move forward from
// one event to the next, and are searched for afresh when the time goes
// back.
type annCursor struct {
	byEnd, byStart       []interval // by end, by start
	afterEnd, afterStart int
	last                 int64 // the time asked last
}

// at returns the two indexes for time t.
func (c *annCursor) at(t int64) (afterEnd, afterStart int) {
	if t < c.last {
		c.afterEnd = sort.Search(len(c.byEnd), func(x int) bool { return c.byEnd[x].end >= t })
		c.afterStart = sort.Search(len(c.byStart), func(x int) bool { return c.byStart[x].start > t })
	}
	for c.afterEnd < len(c.byEnd) && c.byEnd[c.afterEnd].end < t {
		c.afterEnd++
	}
	for c.afterStart < len(c.byStart) && c.byStart[c.afterStart].start <= t {
		c.afterStart++
	}
	c.last = t
	return c.afterEnd, c.afterStart
}

// resolveHints turns per-event hints into phases. Strong hints (forward,
// backward, optimizer, zero_grad, data, and model set-up, which is phase
// unknown) decide directly. An event with Python frames but no marker (loss
// computation, user code) between two strong hints of the same phase takes
// that phase, and after forward is forward (the loss); otherwise it is
// unknown. An event without frames takes the phase around it when both
// sides agree; after forward (or before the first backward or optimizer
// hint) it is backward. An annotated phase that ended (or began) between an
// event and its nearest strong hint counts as that hint, even when it holds
// no event of this device. The phases are written into out (zeroed:
// unknown).
func resolveHints(hints []hint, events []snapshot.Event, ivs []interval, out []uint8) {
	n := len(hints)
	strong := func(h hint) bool { return h >= hintInit }
	byEnd := make([]interval, 0, len(ivs))
	byStart := make([]interval, 0, len(ivs))
	for _, iv := range ivs {
		if iv.Code != codeUnknown && iv.start != math.MinInt64 && iv.end != math.MaxInt64 {
			byEnd = append(byEnd, iv)
			byStart = append(byStart, iv)
		}
	}
	sort.Slice(byEnd, func(a, b int) bool { return byEnd[a].end < byEnd[b].end })
	sort.Slice(byStart, func(a, b int) bool { return byStart[a].start < byStart[b].start })
	timeOf := func(i int) (int64, bool) {
		if i < 0 || i >= n || !events[i].HasTime() {
			return 0, false
		}
		return events[i].TimeNS, true
	}
	// The strong hints around each event, by one forward scan: prevIdx the
	// last before it (−1 when none), ni the first after it (−1 when none).
	// Events between two strong hints form a gap; whether the gap
	// allocates without frames is found once for the gap, when asked.
	nextStrong := func(from int) int {
		for j := from; j < n; j++ {
			if strong(hints[j]) {
				return j
			}
		}
		return -1
	}
	prevIdx, ni := -1, nextStrong(0)
	framelessGap, framelessKnown := false, false
	cur := annCursor{byEnd: byEnd, byStart: byStart, last: math.MinInt64}
	for i, h := range hints {
		if strong(h) {
			out[i] = hintCode(h)
			prevIdx, ni = i, nextStrong(i+1)
			framelessKnown = false
			continue
		}
		prev, next := hintNone, hintNone
		if prevIdx >= 0 {
			prev = hints[prevIdx]
		}
		if ni >= 0 {
			next = hints[ni]
		}
		if t, ok := timeOf(i); ok && len(byEnd) > 0 {
			afterEnd, afterStart := cur.at(t)
			// the latest annotation that ended before this event, after the previous strong hint
			k := afterEnd - 1
			if k >= 0 {
				pt, pok := timeOf(prevIdx)
				if prevIdx < 0 || pok && byEnd[k].end > pt {
					prev = codeHint(byEnd[k].Code)
				}
			}
			// the earliest annotation that starts after this event, before the next strong hint
			k = afterStart
			if k < len(byStart) {
				nt, nok := timeOf(ni)
				if ni < 0 || nok && byStart[k].start < nt {
					next = codeHint(byStart[k].Code)
				}
			}
		}
		switch {
		case prev != hintNone && prev == next:
			out[i] = hintCode(prev)
		case h == HintUser:
			if prev == hintForward {
				out[i] = codeForward
			}
		case prev == hintBackward:
			out[i] = CodeBackward
		case prev == hintForward:
			// backward only if the gap allocates without frames
			end := n
			if ni >= 0 {
				end = ni
			}
			if !framelessKnown {
				framelessGap, framelessKnown = framelessAllocs(hints[prevIdx+1:end], events[prevIdx+1:end]), true
			}
			if framelessGap {
				out[i] = CodeBackward
			} else {
				out[i] = codeForward // frees only: the end of the forward
			}
		case prev == hintZeroGrad && next == hintBackward:
			out[i] = CodeBackward
		case prev == hintNone && (next == hintBackward || next == hintOptimizer):
			out[i] = CodeBackward
		}
	}
}
