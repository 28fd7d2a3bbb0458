package kineto

import (
	"bytes"
	"cmp"
	"slices"
	"strings"

	"github.com/torchmem/torchmem/snapshot"
)

// This file holds the compact records the chrome trace reader keeps (spans,
// memory events, threads, AccumulateGrad ops) and files each decoded event
// into them.

// Span kinds of the X events the reader keeps.
const (
	spanOp     uint8 = iota // cpu_op / legacy Operator
	spanUser                // user_annotation (record_function)
	spanPython              // python_function / legacy Python
)

// opSpan is one kept X event, compactly.
type opSpan struct {
	start, end int64 // ns, relative to baseTimeNanoseconds
	name       int32 // index into traceReader.names
	seq        int32 // file order
	callStack  int32 // index into traceReader.callStacks, −1 when none
	kind       uint8
}

// pieceShift sets the values a piece of a pieceList holds: 2¹⁵.
const pieceShift = 15

const pieceLen = 1 << pieceShift

// pieceList is a list of values in pieces of pieceLen (the first grows by
// append up to that size), never copied to grow: a long trace's spans and
// backward ranges, tens of MB on its main thread, grown by append as one
// slice each, left some four times their size of garbage behind while the
// events were read and swept (the bulk of the reader's garbage).
type pieceList[T any] struct {
	pieces [][]T
	n      int32
}

// add appends v.
func (l *pieceList[T]) add(v T) {
	k := len(l.pieces) - 1
	if k < 0 || len(l.pieces[k]) == pieceLen {
		var p []T
		if k >= 0 {
			p = make([]T, 0, pieceLen)
		}
		l.pieces = append(l.pieces, p)
		k++
	}
	l.pieces[k] = append(l.pieces[k], v)
	l.n++
}

// len is the number of values.
func (l *pieceList[T]) len() int32 { return l.n }

// at is value i, in the order added.
func (l *pieceList[T]) at(i int32) *T {
	return &l.pieces[i>>pieceShift][i&(pieceLen-1)]
}

// spanList is a thread's spans, in file order.
type spanList = pieceList[opSpan]

// Flags of memRec.
const (
	memHasAddr uint8 = 1 << iota
	memHasTA
	memHasTR
	memOOM
	memTAStep // Total Allocated is the device's one before it plus Bytes
	memTRSame // Total Reserved is the device's one before it
)

// memRec is what a [memory] or [OutOfMemory] instant event holds beyond
// its time, address and bytes, which are kept in the event it becomes
// (traceReader.memEv): the records of a trace in time order become the
// device's events in place, never twice in memory. Its Total Allocated and
// Total Reserved are kept only where the device's records before it (in
// file order) do not tell them (traceReader.taVals, trVals): the allocated
// total steps by Bytes and the reserved one seldom changes.
type memRec struct {
	thread int32  // index into traceReader.threads
	dev    uint16 // index into traceReader.devKeys (maxDevices bounds it)
	flags  uint8
}

// counterVal is a Total Allocated or Total Reserved of the record rec.
type counterVal struct {
	rec int32
	v   int64
}

// counters is what a device's records so far, in file order, say of its
// totals: the last Total Allocated and Total Reserved.
type counters struct {
	ta, tr       int64
	hasTA, hasTR bool
}

// keepCounters files the totals of record rec (Bytes n, flags of the record it
// was, the flags to set on it), keeping a value only where c does not
// tell it; c moves on to rec.
func (tr *traceReader) keepCounters(c *counters, rec int32, n int64, ta, trv int64, flags uint8) uint8 {
	if flags&memHasTA != 0 {
		if c.hasTA && ta == c.ta+n {
			flags |= memTAStep
		} else {
			tr.taVals = append(tr.taVals, counterVal{rec, ta})
		}
		c.ta, c.hasTA = ta, true
	}
	if flags&memHasTR != 0 {
		if c.hasTR && trv == c.tr {
			flags |= memTRSame
		} else {
			tr.trVals = append(tr.trVals, counterVal{rec, trv})
		}
		c.tr, c.hasTR = trv, true
	}
	return flags
}

// readCounters is keepCounters backwards: the totals of record rec, from
// the device's records before it (walked in file order, c) and the values
// kept; c moves on to rec.
func (tr *traceReader) readCounters(c *counters, rec int32, n int64, flags uint8) (ta, trv int64) {
	find := func(vals []counterVal) int64 {
		i, _ := slices.BinarySearchFunc(vals, rec, func(v counterVal, r int32) int { return cmp.Compare(v.rec, r) })
		return vals[i].v
	}
	if flags&memHasTA != 0 {
		if flags&memTAStep != 0 {
			c.ta += n
		} else {
			c.ta = find(tr.taVals)
		}
	}
	if flags&memHasTR != 0 && flags&memTRSame == 0 {
		c.tr = find(tr.trVals)
	}
	return c.ta, c.tr
}

// traceThread is one CPU thread (pid, tid) seen in the trace.
type traceThread struct {
	pid, tid string
	spans    spanList
	nMem     int     // its [memory] records
	mem      []int32 // indices into traceReader.mem, listed by build
}

// devKey is a (Device Type, Device Id) pair of [memory] events.
type devKey struct{ typ, id int64 }

// gradRec is one torch::autograd::AccumulateGrad op.
type gradRec struct {
	ts       int64
	thread   int32
	elements int64
	dtype    string
}

// intern returns the index of a name in tr.names; a name longer than
// maxNameBytes is kept cut (cutName).
func (tr *traceReader) intern(b []byte) int32 {
	if len(b) > snapshot.MaxNameBytes {
		b = []byte(snapshot.CutName(string(b)))
	}
	if id, ok := tr.nameIdx[string(b)]; ok {
		return id
	}
	id := int32(len(tr.names))
	s := string(b)
	tr.names = append(tr.names, s)
	tr.nameIdx[s] = id
	return id
}

// thread returns the index of the (pid, tid) thread, creating it. The
// thread of the event before is compared first: a trace lists a thread's
// events together (the real traces and the generated ones miss it a few
// times a thread), and the map's hashing was a tenth of the recording's
// time.
func (tr *traceReader) thread(pid, tid []byte) int32 {
	if tr.lastThread >= 0 {
		if t := tr.threads[tr.lastThread]; t.pid == string(pid) && t.tid == string(tid) {
			return tr.lastThread
		}
	}
	tr.keyBuf = append(append(append(tr.keyBuf[:0], pid...), 0), tid...)
	if id, ok := tr.threadIdx[string(tr.keyBuf)]; ok {
		tr.lastThread = id
		return id
	}
	id := int32(len(tr.threads))
	tr.threads = append(tr.threads, &traceThread{pid: string(pid), tid: string(tid)})
	tr.threadIdx[string(tr.keyBuf)] = id
	tr.lastThread = id
	return id
}

// record files the decoded event.
func (tr *traceReader) record() {
	ev := tr.recEv
	ph := tr.recBytes(ev.ph)
	cat := string(tr.recBytes(ev.cat))
	if ev.cat.ok() {
		switch cat {
		case "Operator", "Runtime", "Kernel", "Memcpy", "Memset", "async":
			tr.legacyCats = true
		case "async_cpu_to_gpu":
			tr.asyncCPU2GPU = true
		case "ac2g", "fwdbwd":
			tr.modernFlows = true
		}
	}
	if len(ph) != 1 {
		return
	}
	switch ph[0] {
	case 'X':
		kind, ok := keptCat(cat, ev.cat.ok())
		if !ok || !ev.name.ok() {
			return
		}
		start, ok := tr.recTime(ev.ts)
		if !ok {
			tr.badTimes++
			return
		}
		dur, ok := tr.recTime(ev.dur)
		if !ok || dur < 0 {
			dur = 0
		}
		end := start + dur
		if end < start {
			end = start
		}
		name := tr.recBytes(ev.name)
		th := tr.thread(tr.recBytes(ev.pid), tr.recBytes(ev.tid))
		sp := opSpan{start: start, end: end, name: tr.intern(name), seq: tr.recSeq, callStack: -1, kind: kind}
		if kind == spanPython {
			tr.hasPython = true
		}
		if cs := tr.recBytes(ev.callStack); len(bytes.TrimSpace(cs)) > 0 {
			if id, ok := tr.csIdx[string(cs)]; ok {
				sp.callStack = id
			} else {
				sp.callStack = int32(len(tr.callStacks))
				tr.callStacks = append(tr.callStacks, string(cs))
				tr.csIdx[string(cs)] = sp.callStack
			}
		}
		t := tr.threads[th]
		t.spans.add(sp)
		if kind == spanOp && string(name) == "torch::autograd::AccumulateGrad" {
			g := gradRec{ts: start, thread: th, elements: -1}
			if ev.inputDims.ok() {
				g.elements = firstDims(tr.recBytes(ev.inputDims))
			}
			if ev.inputType.ok() {
				g.dtype = firstString(tr.recBytes(ev.inputType))
			}
			tr.grads = append(tr.grads, g)
		}
	case 'i', 'I':
		name := string(tr.recBytes(ev.name))
		oom := name == "[OutOfMemory]"
		if name != "[memory]" && !oom {
			return
		}
		if !ev.cat.ok() {
			tr.memNoCat = true
		}
		tr.recordMem(oom)
	case 'M':
		if string(tr.recBytes(ev.name)) != "thread_name" || !ev.argName.ok() {
			return
		}
		tr.keyBuf = append(append(append(tr.keyBuf[:0], tr.recBytes(ev.pid)...), 0), tr.recBytes(ev.tid)...)
		n := string(tr.recBytes(ev.argName))
		if old, ok := tr.threadName[string(tr.keyBuf)]; ok && strings.Contains(old, "pt_autograd") {
			return // keep the autograd label when both are written
		}
		tr.threadName[string(tr.keyBuf)] = n
	}
}

// recordMem files a [memory] or [OutOfMemory] event.
func (tr *traceReader) recordMem(oom bool) {
	ev := tr.recEv
	ts, ok := tr.recTime(ev.ts)
	if !ok {
		tr.badTimes++
		return
	}
	typ, ok1 := tr.recInt(ev.devType)
	id, ok2 := tr.recInt(ev.devID)
	n, ok3 := tr.recInt(ev.bytes)
	if !ok1 || !ok3 {
		tr.badMem++
		return
	}
	if !ok2 {
		id = 0 // a GPU without Device Id: the first one (CPU memory is −1 below)
	}
	if !oom && n == 0 {
		tr.zeroBytes++
		return
	}
	e := snapshot.Event{TimeNS: ts, Size: n}
	m := memRec{thread: tr.thread(tr.recBytes(ev.pid), tr.recBytes(ev.tid))}
	if oom {
		m.flags |= memOOM
	}
	if ev.addr.ok() {
		if a, ok := tr.recUint(ev.addr); ok {
			e.Addr = a
			m.flags |= memHasAddr
			tr.memAddr = true
		}
	}
	ta, ok := tr.recInt(ev.ta)
	if ok {
		m.flags |= memHasTA
	}
	trv, ok := tr.recInt(ev.tr)
	if ok {
		m.flags |= memHasTR
	}
	k := devKey{typ, id}
	if typ == 0 {
		k.id = -1
	}
	if di, ok := tr.devIdx[k]; ok {
		m.dev = di
	} else if len(tr.devKeys) >= tr.maxDevices() {
		tr.devOverflow = true // build refuses the file
		return
	} else {
		m.dev = uint16(len(tr.devKeys))
		tr.devKeys = append(tr.devKeys, k)
		tr.devIdx[k] = m.dev
		tr.devCounters = append(tr.devCounters, counters{})
	}
	m.flags = tr.keepCounters(&tr.devCounters[m.dev], int32(len(tr.mem)), n, ta, trv, m.flags)
	tr.walkMem(m.dev, ts, e.Addr, n, m.flags, ta, trv)
	tr.mem = append(tr.mem, m)
	tr.memEv = append(tr.memEv, e)
	tr.threads[m.thread].nMem++
}

// maxDevices is Options.MaxDevices, at most 1<<16 (a memRec's device index
// is 16 bits).
func (tr *traceReader) maxDevices() int {
	return min(tr.opts.MaxDevices, 1<<16)
}
