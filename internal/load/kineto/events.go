package kineto

// This file decodes the events of a chrome trace one at a time: the
// traceEvents array, each event object and the few args the reader uses.

// readEvents reads the events of an array whose '[' was consumed, up to and
// including its ']'.
func (tr *traceReader) readEvents(where string) error {
	tr.startRecording()
	defer func() {
		if p := tr.stopRecording(); p != nil {
			panic(p) // for readChromeTrace's recover, as if it had happened here
		}
	}()
	i := 0
	if tr.fast {
		i = tr.lexEvents() // the decoder reads on from where the fast path stops
	}
	for dec := tr.dec; ; i++ {
		switch k := dec.PeekKind(); k {
		case ']':
			_, err := dec.ReadToken()
			return tr.wrap(err)
		case '{':
			if err := tr.readEvent(); err != nil {
				return err
			}
		case 'n':
			if _, err := dec.ReadValue(); err != nil {
				return tr.wrap(err)
			}
		case 0:
			_, err := dec.ReadToken()
			return tr.wrap(err)
		default:
			return tr.errAt(tr.nextOffset(), "not a chrome trace: element %d of %s is %s, not an event object", i, where, jsonKindName(k))
		}
	}
}

// keptCat reports whether X events of this category are kept as spans.
func keptCat(cat string, hasCat bool) (uint8, bool) {
	if !hasCat {
		return spanOp, true
	}
	switch cat {
	case "cpu_op", "Operator":
		return spanOp, true
	case "user_annotation":
		return spanUser, true
	case "python_function", "Python":
		return spanPython, true
	}
	return 0, false
}

// readEvent decodes one event object into tr.ev and records what it holds.
func (tr *traceReader) readEvent() error {
	ev := &tr.ev
	ev.reset()
	err := tr.eachMember(func(key []byte) error {
		if string(key) == `"args"` {
			return tr.readArgs()
		}
		dst, _ := tr.eventField(key)
		return tr.keepValue(dst, true)
	})
	if err != nil {
		return err
	}
	tr.seq++
	tr.queue()
	return nil
}

// argsWanted reports whether the args of the event being read matter, from
// the fields seen so far (Kineto writes ph, cat and name before args).
func (tr *traceReader) argsWanted() bool {
	ev := &tr.ev
	if !ev.ph.ok() {
		return true
	}
	switch string(tr.bytesOf(ev.ph)) {
	case "X":
		if !ev.cat.ok() {
			return true
		}
		_, ok := keptCat(string(tr.bytesOf(ev.cat)), true)
		return ok
	case "i", "I", "M":
		return true
	}
	return false
}

// readArgs reads the args object, keeping the few values the reader uses.
func (tr *traceReader) readArgs() error {
	dec := tr.dec
	if !tr.argsWanted() || dec.PeekKind() != '{' {
		return tr.wrap(dec.SkipValue())
	}
	ev := &tr.ev
	ev.hasArgs = true
	return tr.eachMember(func(key []byte) error {
		dst, _ := tr.argField(key)
		return tr.keepValue(dst, false)
	})
}

// argField returns where an args member of an event is kept (nil for a
// member nobody reads) and whether it is one of the integers the fast path
// keeps parsed; the members that only tell the trace's writer apart set
// their fingerprint. Both readers of args ask it, so they keep the same.
func (tr *traceReader) argField(key []byte) (dst *field, num bool) {
	ev := &tr.ev
	switch string(key) {
	case `"Device Type"`:
		return &ev.devType, true
	case `"Device Id"`:
		return &ev.devID, true
	case `"Addr"`:
		return &ev.addr, true
	case `"Bytes"`:
		return &ev.bytes, true
	case `"Total Allocated"`:
		return &ev.ta, true
	case `"Total Reserved"`:
		return &ev.tr, true
	case `"Input Dims"`:
		return &ev.inputDims, false
	case `"Input type"`:
		return &ev.inputType, false
	case `"Call stack"`:
		return &ev.callStack, false
	case `"name"`:
		return &ev.argName, false
	case `"Profiler Event Index"`:
		tr.profEvIdx = true
	case `"Record function id"`:
		tr.recordFnID = true
	case `"Ev Idx"`:
		tr.evIdx = true
	}
	return nil, false
}

// eventField returns where an event's member (other than args) is kept
// (nil for a member nobody reads) and whether it is one of the integers the
// fast path keeps parsed. Both readers of events ask it.
func (tr *traceReader) eventField(key []byte) (dst *field, num bool) {
	ev := &tr.ev
	switch string(key) {
	case `"ph"`:
		return &ev.ph, false
	case `"cat"`:
		return &ev.cat, false
	case `"name"`:
		return &ev.name, false
	case `"pid"`:
		return &ev.pid, false
	case `"tid"`:
		return &ev.tid, false
	case `"ts"`:
		return &ev.ts, true
	case `"dur"`:
		return &ev.dur, true
	}
	return nil, false
}
