package kineto

import (
	"unsafe"

	"github.com/torchmem/torchmem/internal/beside"
	"github.com/torchmem/torchmem/snapshot"
)

// The threads are swept on two goroutines: the first thread with the
// model's builder, the others beside it, one after another, each stack
// they meet kept as what it is made of (besideStacks). Once the first
// thread is swept, those stacks are made the model's in the order they
// were met, which is the order one sweep of every thread in turn makes
// them in: the model's frames, stacks and strings, and so the output, are
// those of a single sweep.

// besideStacks interns the stacks of a sweep beside the first thread's.
// A stack is kept as pairs of int32: (name, kind) for a span's frame,
// innermost first, (−1, Call stack) for a legacy Call stack, and last (−2,
// name of its op, or −1); it is numbered from 1 in the order met (0 is the
// empty stack).
type besideStacks struct {
	idx  map[string]uint32
	refs []int32 // the stacks' pairs, one stack after another
	ends []int32 // where each stack's pairs end in refs
	key  []int32
}

// stack interns the stack of the open spans, as sweeper.stack does.
func (bs *besideStacks) stack(spans *spanList, open []openSpan) uint32 {
	if len(open) == 0 {
		return 0
	}
	key := bs.key[:0]
	for k := len(open) - 1; k >= 0 && len(key) < 2*maxTraceStack; k-- {
		sp := spans.at(open[k].i)
		key = append(key, sp.name, int32(sp.kind))
	}
	top := open[len(open)-1]
	if top.cs >= 0 { // its frames are made even when no room is left for them
		key = append(key, -1, top.cs)
	}
	op := int32(-1)
	if top.op >= 0 {
		op = spans.at(top.op).name
	}
	key = append(key, -2, op)
	bs.key = key
	kb := unsafe.Slice((*byte)(unsafe.Pointer(&key[0])), len(key)*4)
	if id, ok := bs.idx[string(kb)]; ok {
		return id
	}
	bs.refs = append(bs.refs, key...)
	bs.ends = append(bs.ends, int32(len(bs.refs)))
	id := uint32(len(bs.ends))
	bs.idx[string(kb)] = id
	return id
}

// model makes each stack of bs the model's, in the order met, with the
// frames, Call stacks and op names of sw, and returns them by number.
func (sw *sweeper) model(bs *besideStacks) []stackOf {
	out := make([]stackOf, len(bs.ends)+1)
	start := int32(0)
	for i, end := range bs.ends {
		refs := bs.refs[start:end]
		start = end
		fs := sw.frames[:0]
		op := int32(-1)
		for j := 0; j < len(refs); j += 2 {
			switch a, v := refs[j], refs[j+1]; a {
			case -1:
				for _, f := range sw.callStack(v) {
					if len(fs) >= maxTraceStack {
						break
					}
					fs = append(fs, f)
				}
			case -2:
				op = v
			default:
				fs = append(fs, sw.frame(a, uint8(v)))
			}
		}
		sw.frames = fs
		o := &out[i+1]
		o.stack = sw.b.Stack(fs)
		if op >= 0 {
			o.meta = sw.meta(op)
		}
	}
	return out
}

// stackOf is a stack of a sweep beside the first thread's, made the model's.
type stackOf struct {
	stack snapshot.StackID
	meta  uint32
}

// sweepThreads sweeps every thread (sweeper.thread): the first on this
// goroutine, the others beside it. It returns the annotations, in the order
// of the threads, and each thread's backward spans.
func (tr *traceReader) sweepThreads(sw *sweeper, main int, tmap []uint16) ([]snapshot.Annotation, []*pieceList[timeRange]) {
	bwUnits := make([]*pieceList[timeRange], len(tr.threads))
	sweep := func(sw *sweeper, ti int, anns *[]snapshot.Annotation) {
		t := tr.threads[ti]
		bwUnits[ti] = sw.thread(int32(ti), t, ti == main, tmap[ti], anns)
		// Swept: the collector may take the thread's spans back before the
		// devices' events are made (together the peak of the reader).
		t.spans = spanList{}
	}
	var anns, besideAnns []snapshot.Annotation
	var wait func()
	var bs *besideStacks
	if len(tr.threads) > 1 {
		bs = &besideStacks{idx: map[string]uint32{}}
		other := &sweeper{tr: tr, classes: sw.classes, hasEvalFn: sw.hasEvalFn, beside: bs}
		wait = beside.Go(func() {
			for ti := 1; ti < len(tr.threads); ti++ {
				sweep(other, ti, &besideAnns)
			}
		})
	}
	if len(tr.threads) > 0 {
		sweep(sw, 0, &anns)
		tr.threads[0].mem = nil
	}
	if wait == nil {
		return anns, bwUnits
	}
	wait()
	stacks := sw.model(bs)
	for _, t := range tr.threads[1:] {
		for _, mi := range t.mem {
			e := &tr.memEv[mi]
			o := stacks[e.Stack]
			e.Stack, e.Meta = o.stack, o.meta
		}
		t.mem = nil
	}
	return append(anns, besideAnns...), bwUnits
}
