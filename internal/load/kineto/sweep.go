package kineto

import (
	"cmp"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/snapshot"
)

// sweeper walks each thread's spans and memory events in time order.
type sweeper struct {
	tr        *traceReader
	b         *snapshot.Builder
	classes   []uint8
	hasEvalFn bool
	frameOf   []uint32 // by name: its frame's ID + 1, 0 until made
	metaOf    []uint32 // by name: its string's index + 1, 0 until made
	csFrames  map[int32][]snapshot.FrameID
	frames    []snapshot.FrameID
	// beside: the sweep runs beside the first thread's, without b; its
	// stacks are numbered by beside (sweep_beside.go), and a memory event's
	// Stack is that number until they are made the model's.
	beside *besideStacks
}

// frame is the frame of a span of this name and kind; a name's first span
// decides its frame.
func (sw *sweeper) frame(name int32, kind uint8) snapshot.FrameID {
	if id := sw.frameOf[name]; id > 0 {
		return snapshot.FrameID(id - 1)
	}
	n := sw.tr.names[name]
	f := snapshot.Frame{Name: n}
	if kind == spanPython {
		f = parsePyFrame(n)
	}
	id := sw.b.Frame(f)
	sw.frameOf[name] = uint32(id) + 1
	return id
}

func (sw *sweeper) callStack(id int32) []snapshot.FrameID {
	if fs, ok := sw.csFrames[id]; ok {
		return fs
	}
	var fs []snapshot.FrameID
	for _, part := range strings.Split(sw.tr.callStacks[id], ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		fs = append(fs, sw.b.Frame(parsePyFrame(part)))
		if len(fs) == maxTraceStack {
			break
		}
	}
	sw.csFrames[id] = fs
	return fs
}

func (sw *sweeper) meta(name int32) uint32 {
	if id := sw.metaOf[name]; id > 0 {
		return id - 1
	}
	id := sw.b.String(sw.tr.names[name])
	sw.metaOf[name] = id + 1
	return id
}

// thread sweeps one thread: it appends the thread's annotations, sets the
// stack and op of each of its memory events, and returns its top-level
// backward spans in time order.
func (sw *sweeper) thread(ti int32, t *traceThread, isMain bool, mt uint16, anns *[]snapshot.Annotation) *pieceList[timeRange] {
	tr := sw.tr
	spans := &t.spans
	order := spanOrder(spans)
	mem := t.mem
	byTime := func(x, y int32) int { return cmp.Compare(tr.memEv[x].TimeNS, tr.memEv[y].TimeNS) }
	if !slices.IsSortedFunc(mem, byTime) { // in time order already in the usual trace
		slices.SortStableFunc(mem, byTime)
	}

	var open []openSpan
	var nModule, nBackward, nForward int
	version, cachedVersion := 0, -1
	var cachedStack snapshot.StackID
	var cachedMeta uint32
	bw := &pieceList[timeRange]{}

	pop := func() {
		o := open[len(open)-1]
		open = open[:len(open)-1]
		if o.flags&openModule != 0 {
			nModule--
		}
		if o.flags&openBackward != 0 {
			nBackward--
		}
		if o.flags&openForward != 0 {
			nForward--
		}
		version++
	}
	push := func(i int32) {
		sp := spans.at(i)
		end := sp.end
		for len(open) > 0 {
			top := open[len(open)-1]
			if top.end >= end {
				break
			}
			if top.end >= sp.start && end-top.end <= overhangNS {
				end = top.end // rounding overhang: still nested
				break
			}
			pop()
		}
		var flags uint8
		cls := sw.classes[sp.name]
		isUserOrOp := sp.kind != spanPython
		switch {
		case isUserOrOp && cls == clsStep:
			*anns = append(*anns, snapshot.Annotation{Name: tr.names[sp.name], Device: -1, StartNS: sp.start, EndNS: sp.end, Thread: mt, Kind: snapshot.AnnotationStep})
		case isUserOrOp && cls == clsOpt:
			*anns = append(*anns, snapshot.Annotation{Name: tr.names[sp.name], Device: -1, StartNS: sp.start, EndNS: sp.end, Thread: mt, Kind: snapshot.AnnotationOptStep})
		case isUserOrOp && cls == clsZero:
			*anns = append(*anns, snapshot.Annotation{Name: tr.names[sp.name], Device: -1, StartNS: sp.start, EndNS: sp.end, Thread: mt, Kind: snapshot.AnnotationZeroGrad})
		case isUserOrOp && cls == clsData:
			*anns = append(*anns, snapshot.Annotation{Name: tr.names[sp.name], Device: -1, StartNS: sp.start, EndNS: sp.end, Thread: mt, Kind: snapshot.AnnotationData})
		case cls == clsEvalFn || (cls == clsLegacyBw && !sw.hasEvalFn && !isMain && isUserOrOp):
			if nBackward == 0 {
				bw.add(timeRange{sp.start, sp.end})
			}
			flags |= openBackward
		case (isUserOrOp && cls == clsForward) || (sp.kind == spanPython && cls == clsModule && nModule == 0):
			if nForward == 0 && nBackward == 0 {
				*anns = append(*anns, snapshot.Annotation{Name: tr.names[sp.name], Device: -1, StartNS: sp.start, EndNS: sp.end, Thread: mt, Kind: snapshot.AnnotationForward})
				flags |= openForward
			}
		case sp.kind == spanUser:
			*anns = append(*anns, snapshot.Annotation{Name: tr.names[sp.name], Device: -1, StartNS: sp.start, EndNS: sp.end, Thread: mt, Kind: snapshot.AnnotationUser})
		}
		if sp.kind == spanPython && cls == clsModule {
			flags |= openModule
		}
		if flags&openModule != 0 {
			nModule++
		}
		if flags&openBackward != 0 {
			nBackward++
		}
		if flags&openForward != 0 {
			nForward++
		}
		o := openSpan{i: i, end: end, op: -1, cs: sp.callStack, flags: flags}
		if len(open) > 0 {
			o.op, o.cs = open[len(open)-1].op, open[len(open)-1].cs
			if sp.callStack >= 0 {
				o.cs = sp.callStack
			}
		}
		if sp.kind != spanPython {
			o.op = i
		}
		open = append(open, o)
		version++
	}

	// next is the span at position si of the time order.
	next := func(si int32) int32 {
		if order == nil {
			return si
		}
		return order[si]
	}
	si, n := int32(0), spans.len()
	for _, mi := range mem {
		ts := tr.memEv[mi].TimeNS
		for si < n && spans.at(next(si)).start <= ts {
			push(next(si))
			si++
		}
		for len(open) > 0 && open[len(open)-1].end < ts {
			pop()
		}
		if version != cachedVersion {
			cachedStack, cachedMeta = sw.stack(spans, open)
			cachedVersion = version
		}
		e := &tr.memEv[mi] // its stack and op, kept in the event it becomes
		e.Stack, e.Meta = cachedStack, cachedMeta
	}
	for ; si < n; si++ {
		push(next(si))
	}
	return bw
}

// spanOrder returns the positions of a thread's spans in time order: by
// start, the longer first, then in file order; nil when the file order is
// that order already (the usual trace), which spares a position a span.
func spanOrder(spans *spanList) []int32 {
	before := func(x, y *opSpan) int {
		if c := cmp.Compare(x.start, y.start); c != 0 {
			return c
		}
		if c := cmp.Compare(y.end, x.end); c != 0 {
			return c
		}
		return cmp.Compare(x.seq, y.seq)
	}
	n := spans.len()
	sorted := true
	for i := int32(1); i < n && sorted; i++ {
		sorted = before(spans.at(i-1), spans.at(i)) < 0
	}
	if sorted {
		return nil
	}
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int { return before(spans.at(x), spans.at(y)) })
	return order
}

// stack builds the stack of the open spans, innermost first, followed by
// the legacy Call stack of the innermost op that has one; and the innermost
// op's name.
func (sw *sweeper) stack(spans *spanList, open []openSpan) (snapshot.StackID, uint32) {
	if sw.beside != nil {
		return snapshot.StackID(sw.beside.stack(spans, open)), 0
	}
	if len(open) == 0 {
		return 0, 0
	}
	fs := sw.frames[:0]
	for k := len(open) - 1; k >= 0 && len(fs) < maxTraceStack; k-- {
		sp := spans.at(open[k].i)
		fs = append(fs, sw.frame(sp.name, sp.kind))
	}
	top := open[len(open)-1]
	if top.cs >= 0 {
		for _, f := range sw.callStack(top.cs) {
			if len(fs) >= maxTraceStack {
				break
			}
			fs = append(fs, f)
		}
	}
	sw.frames = fs
	var meta uint32
	if top.op >= 0 {
		meta = sw.meta(spans.at(top.op).name)
	}
	return sw.b.Stack(fs), meta
}
