package kineto

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/snapshot"
)

// This file turns the records the chrome trace reader collected into the
// model: devices and their events, annotations, threads and stacks.

// maxTraceStack bounds the frames of one allocation stack (innermost kept).
const maxTraceStack = 64

// backwardGapNS is the largest gap between two backward spans of a thread
// that still merges them into one backward range, when no step, optimizer,
// zero_grad, data or forward range starts in the gap.
const backwardGapNS = 10_000_000

// overhangNS is how far a span may end after the span it starts in and still
// count as nested in it (timestamps are rounded, to the µs in old traces).
const overhangNS = 1000

// Name classes of spans.
const (
	clsOther uint8 = iota
	clsStep
	clsOpt
	clsZero
	clsData
	clsForward  // ## forward ##, *DataParallel.forward, CompiledFunction
	clsModule   // nn.Module: X (python tracer)
	clsEvalFn   // autograd::engine::evaluate_function: …
	clsLegacyBw // NllLossBackward, torch::autograd::AccumulateGrad (legacy traces)
)

// markerClass is the span class of each of PyTorch's own markers.
var markerClass = map[snapshot.AnnotationKind]uint8{
	snapshot.AnnotationStep: clsStep, snapshot.AnnotationOptStep: clsOpt, snapshot.AnnotationZeroGrad: clsZero, snapshot.AnnotationData: clsData,
}

func classifyName(n string) uint8 {
	if k, ok := snapshot.PyTorchMarker(n); ok {
		return markerClass[k]
	}
	switch {
	case strings.HasPrefix(n, "ProfilerStep #"): // spelled with a space: accepted in traces only, as before
		return clsStep
	case strings.HasPrefix(n, "autograd::engine::evaluate_function:"):
		return clsEvalFn
	case strings.HasPrefix(n, "nn.Module: "):
		return clsModule
	case n == "CompiledFunction" || strings.HasSuffix(n, "DataParallel.forward"):
		return clsForward
	case strings.HasPrefix(n, "##") && strings.Contains(strings.ToLower(n), "forward"):
		return clsForward
	case n == "torch::autograd::AccumulateGrad":
		return clsLegacyBw
	case strings.HasSuffix(strings.TrimRight(n, "0123456789"), "Backward") && !strings.Contains(n, "::") && !strings.Contains(n, " "):
		return clsLegacyBw
	}
	return clsOther
}

// Flags of an open span in the sweep.
const (
	openModule uint8 = 1 << iota
	openBackward
	openForward
)

type openSpan struct {
	i     int32 // index into the thread's spans
	end   int64 // end used for nesting (clamped to the parent's)
	op    int32 // innermost open op (not python) at or below this one, −1 if none
	cs    int32 // innermost legacy Call stack at or below this one, −1 if none
	flags uint8
}

type timeRange struct{ start, end int64 }

// generation names the trace era from its fingerprints (the eras of the
// package documentation): "2021-legacy", "2022", "2023", "2024+", or
// "unknown" when the file has none of them.
func (tr *traceReader) generation() string {
	switch {
	case tr.hasBase || tr.recordFnID:
		return "2024+"
	case tr.legacyCats || tr.memNoCat:
		return "2021-legacy"
	case tr.profEvIdx || tr.asyncCPU2GPU:
		return "2022"
	case tr.evIdx || tr.modernFlows || tr.memAddr:
		return "2023"
	}
	return "unknown"
}

// abs converts a time relative to baseTimeNanoseconds to the file's clock.
func (tr *traceReader) abs(t int64) int64 {
	if !tr.hasBase {
		return t
	}
	if (tr.baseNS > 0 && t > math.MaxInt64-tr.baseNS) || (tr.baseNS < 0 && t < math.MinInt64+1-tr.baseNS) {
		return t
	}
	return t + tr.baseNS
}

func deviceOf(k devKey, rocm bool) (int, snapshot.DeviceKind) {
	id := int(k.id)
	switch k.typ {
	case 0:
		return -1, snapshot.DeviceCPU
	case 1:
		if rocm {
			return id, snapshot.DeviceROCm
		}
		return id, snapshot.DeviceCUDA
	case 6:
		return id, snapshot.DeviceROCm
	case 12:
		return id, snapshot.DeviceXPU
	}
	return id, snapshot.DeviceOther
}

func (tr *traceReader) build() (*snapshot.Snapshot, error) {
	if tr.devOverflow {
		return nil, tr.errAt(-1, "[memory] events on more than %d devices (a machine has at most a few hundred; limit snapshot.Options.MaxDevices)", tr.maxDevices())
	}
	src := tr.src
	src.Format = snapshot.FormatChromeTrace
	src.Keys = tr.keys
	src.Distributed = tr.dist
	src.Bytes = tr.inputOffset(tr.delivered())
	src.Generation = tr.generation()
	b := snapshot.NewBuilder(src)
	s := b.Snap
	s.Recording = snapshot.RecordingProfiler
	if tr.hasPython || len(tr.callStacks) > 0 {
		s.Recording = snapshot.RecordingProfilerStacks
	}

	classes := make([]uint8, len(tr.names))
	hasEvalFn := false
	for i, n := range tr.names {
		classes[i] = classifyName(n)
		if classes[i] == clsEvalFn {
			hasEvalFn = true
		}
	}
	main := tr.mainThread(classes)

	// Model threads, in order of first appearance.
	tmap := make([]uint16, len(tr.threads))
	for i, t := range tr.threads {
		if t.spans.len() == 0 && t.nMem == 0 {
			continue
		}
		tmap[i] = b.Thread(t.pid, t.tid)
		if tmap[i] != 0 {
			s.Threads[tmap[i]].Name = tr.threadName[t.pid+"\x00"+t.tid]
		}
	}

	sw := &sweeper{tr: tr, b: b, classes: classes, hasEvalFn: hasEvalFn,
		frameOf: make([]uint32, len(tr.names)), metaOf: make([]uint32, len(tr.names)), csFrames: make(map[int32][]snapshot.FrameID)}
	// Each thread's [memory] records, listed at their size once all are
	// read (lists grown by append while reading left copies behind).
	for _, t := range tr.threads {
		t.mem = make([]int32, 0, t.nMem)
	}
	for i := range tr.mem {
		t := tr.threads[tr.mem[i].thread]
		t.mem = append(t.mem, int32(i))
	}
	anns, bwUnits := tr.sweepThreads(sw, main, tmap)

	// Backward ranges: merge each thread's backward spans across small gaps
	// in which no other phase begins.
	var bounds []int64
	for _, a := range anns {
		switch a.Kind {
		case snapshot.AnnotationStep, snapshot.AnnotationOptStep, snapshot.AnnotationZeroGrad, snapshot.AnnotationData, snapshot.AnnotationForward:
			bounds = append(bounds, a.StartNS)
		}
	}
	slices.Sort(bounds)
	for ti, units := range bwUnits {
		if units.len() == 0 {
			continue
		}
		if tmap[ti] != 0 && ti != main {
			s.Threads[tmap[ti]].Autograd = true
		}
		cur := *units.at(0)
		flush := func() {
			anns = append(anns, snapshot.Annotation{Name: "backward", Device: -1, StartNS: cur.start, EndNS: cur.end, Thread: tmap[ti], Kind: snapshot.AnnotationBackward})
		}
		for k := int32(1); k < units.len(); k++ {
			u := *units.at(k)
			if u.start <= cur.end || (u.start-cur.end <= backwardGapNS && !boundaryIn(bounds, cur.end, u.start)) {
				cur.end = max(cur.end, u.end)
				continue
			}
			flush()
			cur = u
		}
		flush()
	}
	for i := range s.Threads {
		if strings.Contains(s.Threads[i].Name, "pt_autograd") {
			s.Threads[i].Autograd = true
		}
	}
	for i := range anns {
		anns[i].StartNS, anns[i].EndNS = tr.abs(anns[i].StartNS), tr.abs(anns[i].EndNS)
	}
	slices.SortStableFunc(anns, func(x, y snapshot.Annotation) int { return cmp.Compare(x.StartNS, y.StartNS) })
	s.Annotations = anns

	noMemory := len(tr.mem) == 0
	tr.buildDevices(b, tmap)
	tr.mem, tr.memEv = nil, nil // the model holds the events now

	slices.SortStableFunc(tr.grads, func(x, y gradRec) int { return cmp.Compare(x.ts, y.ts) })
	for _, g := range tr.grads {
		s.GradAccumulations = append(s.GradAccumulations, snapshot.GradAccumulation{TimeNS: tr.abs(g.ts), Thread: tmap[g.thread], Elements: g.elements, DType: g.dtype})
	}

	if noMemory {
		s.Diag("no_memory_events", -1, "the trace has no [memory] events (recorded without profile_memory=True): no memory curve")
	}
	if n := tr.replaced(); n > 0 {
		s.Diag("control_characters", -1, fmt.Sprintf("%d raw control characters inside JSON strings were read as spaces", n))
	}
	if tr.badTimes > 0 {
		s.Diag("bad_timestamps", -1, fmt.Sprintf("%d events without a readable ts were skipped", tr.badTimes))
	}
	if tr.badMem > 0 {
		s.Diag("bad_memory_events", -1, fmt.Sprintf("%d [memory] events without a readable Device Type or Bytes were skipped", tr.badMem))
	}
	if tr.zeroBytes > 0 {
		s.Diag("zero_byte_memory_events", -1, fmt.Sprintf("%d [memory] events of 0 bytes were skipped", tr.zeroBytes))
	}
	if tr.hasBase && tr.abs(0) == 0 && tr.baseNS != 0 {
		s.Diag("bad_timestamps", -1, "baseTimeNanoseconds overflows int64 nanoseconds: times are relative to it")
	}
	return s, nil
}

// boundaryIn reports whether a phase starts in (from, to].
func boundaryIn(bounds []int64, from, to int64) bool {
	i, _ := slices.BinarySearch(bounds, from+1)
	return i < len(bounds) && bounds[i] <= to
}

// mainThread picks the training-loop thread: the one with ProfilerStep
// spans, else Optimizer.step spans, else the most spans that are not
// backward nodes. −1 when there are no spans.
func (tr *traceReader) mainThread(classes []uint8) int {
	best, bestScore := -1, int64(-1)
	for i, t := range tr.threads {
		score := int64(0) // ProfilerStep spans outweigh 2^30 others: int64 on 32-bit builds too
		for _, p := range t.spans.pieces {
			for k := range p {
				switch classes[p[k].name] {
				case clsStep:
					score += 1 << 40
				case clsOpt:
					score += 1 << 30
				case clsEvalFn, clsLegacyBw:
				default:
					score++
				}
			}
		}
		if t.spans.len() > 0 && score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}
