package snapshot

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// This file is the Kineto chrome-trace reader (issue 3): it streams the
// tokens of {"traceEvents": [...]} (or a bare array of events) and decodes
// one event at a time into compact records; trace_build.go turns those into
// the model. See shared/docs/chrome-trace.md for the format.

// readChromeTrace decodes a Kineto chrome trace, .json or gzip, from the 2021
// format to today, or the raw export of torch.profiler's
// export_memory_timeline (a JSON array of [t_ns, action, bytes, category]).
// lead is the number of input bytes already consumed (leading whitespace).
func readChromeTrace(in *bufio.Reader, src Source, opts Options, lead int64) (s *Snapshot, err error) {
	opts = opts.withDefaults()
	var tr *traceReader
	defer func() {
		if r := recover(); r != nil {
			s = nil
			err = &Error{Path: src.Path, Offset: tr.offset(), Msg: fmt.Sprintf("malformed chrome trace (reader failure: %v)", r)}
		}
	}()
	tr = newTraceReader(in, src, opts)
	tr.skip += lead
	defer tr.ra.stop()
	return tr.read()
}

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

// Flags of memRec.
const (
	memHasAddr uint8 = 1 << iota
	memHasTA
	memHasTR
	memOOM
)

// memRec is one [memory] or [OutOfMemory] instant event.
type memRec struct {
	ts     int64
	addr   uint64
	bytes  int64
	ta, tr int64
	thread int32 // index into traceReader.threads
	dev    int32 // index into traceReader.devKeys
	flags  uint8
}

// traceThread is one CPU thread (pid, tid) seen in the trace.
type traceThread struct {
	pid, tid string
	spans    []opSpan
	mem      []int32 // indices into traceReader.mem
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

// field is a piece of traceReader.arena: the unquoted text of one value.
type field struct{ off, n int32 }

var noField = field{0, -1}

func (f field) ok() bool { return f.n >= 0 }

// rawEvent holds the fields of the event being decoded.
type rawEvent struct {
	ph, cat, name, pid, tid, ts, dur field
	// args the reader uses
	devType, devID, addr, bytes, ta, tr field
	inputDims, inputType, callStack     field
	argName                             field // thread_name M events
	hasArgs                             bool
}

func (e *rawEvent) reset() {
	*e = rawEvent{
		ph: noField, cat: noField, name: noField, pid: noField, tid: noField, ts: noField, dur: noField,
		devType: noField, devID: noField, addr: noField, bytes: noField, ta: noField, tr: noField,
		inputDims: noField, inputType: noField, callStack: noField, argName: noField,
	}
}

type traceReader struct {
	src  Source
	opts Options
	ra   *readAhead // reads through the sanitiser, on a goroutine of its own
	san  *ctrlSanitizer
	dec  *jsontext.Decoder
	skip int64 // bytes skipped before the decoder (leading whitespace, a UTF-8 BOM)

	arena []byte   // the text of the fields of the events queued (JSON side)
	ev    rawEvent // the event being decoded
	seq   int32

	rec      *recordPipe // see trace_pipeline.go
	recArena []byte      // the recording goroutine's event: its fields' text,
	recEv    *rawEvent   // its fields
	recSeq   int32       // and its position in the file

	names      []string
	nameIdx    map[string]int32
	callStacks []string
	csIdx      map[string]int32
	threads    []*traceThread
	threadIdx  map[string]int32
	keyBuf     []byte
	threadName map[string]string // pid\x00tid → thread_name
	mem        []memRec
	devKeys    []devKey
	devIdx     map[devKey]int32
	grads      []gradRec

	keys        []string
	baseNS      int64
	hasBase     bool
	rocm        bool
	hasEvents   bool
	hasDevProps bool
	devProps    map[int64]devProp
	dist        *Distributed

	// fingerprints
	legacyCats, memNoCat, profEvIdx, asyncCPU2GPU, recordFnID, evIdx, modernFlows, memAddr, hasPython bool
	badTimes, badMem, zeroBytes                                                                       int

	devOverflow bool // [memory] events on more devices than Options.MaxDevices
}

type devProp struct {
	name string
	mem  int64
}

func newTraceReader(in *bufio.Reader, src Source, opts Options) *traceReader {
	tr := &traceReader{
		src:        src,
		opts:       opts,
		nameIdx:    make(map[string]int32),
		csIdx:      make(map[string]int32),
		threadIdx:  make(map[string]int32),
		threadName: make(map[string]string),
		devProps:   make(map[int64]devProp),
		devIdx:     make(map[devKey]int32),
	}
	// Size the [memory] records from the file size (a record is about 300
	// bytes of JSON): growing the slice would copy it over and over, while
	// capacity never written costs address space, not memory.
	if est := src.FileBytes / 300; src.FileBytes > 0 && !src.Gzipped {
		tr.mem = make([]memRec, 0, min(est, 1<<26))
	}
	if head, _ := in.Peek(3); len(head) == 3 && head[0] == 0xef && head[1] == 0xbb && head[2] == 0xbf {
		in.Discard(3)
		tr.skip = 3
	}
	san := newSanitizer(in, opts)
	tr.san = san
	tr.ra = newReadAhead(san, func() int64 { return san.replaced })
	tr.dec = jsontext.NewDecoder(tr.ra, jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	return tr
}

// offset is the input offset of the last value read.
func (tr *traceReader) offset() int64 {
	if tr == nil || tr.dec == nil {
		return -1
	}
	return tr.inputOffset(tr.dec.InputOffset())
}

// inputOffset maps an offset of the text the decoder was given to the
// offset in the (decompressed) input.
func (tr *traceReader) inputOffset(dec int64) int64 {
	return tr.san.rawOffset(dec) + tr.skip
}

// nextOffset is the input offset of the next value (after a PeekKind).
func (tr *traceReader) nextOffset() int64 {
	off := tr.dec.InputOffset()
	for _, c := range tr.dec.UnreadBuffer() {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != ':' && c != ',' {
			break
		}
		off++
	}
	return tr.inputOffset(off)
}

// errAt makes an *Error at a byte offset of the decompressed input.
func (tr *traceReader) errAt(off int64, format string, args ...any) *Error {
	return &Error{Path: tr.src.Path, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// wrap turns a decoder or read error into an *Error with its byte offset;
// errTooLarge is returned as is for Read to report.
func (tr *traceReader) wrap(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, errTooLarge) {
		return errTooLarge
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var le *errLimit
	if errors.As(err, &le) {
		return tr.errAt(le.offset+tr.skip, "invalid chrome trace JSON: %s", le.Error())
	}
	end := tr.inputOffset(tr.ra.n) // bytes the decoder was given
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		off := tr.inputOffset(se.ByteOffset)
		msg := "syntax error"
		if se.Err != nil {
			msg = strings.TrimPrefix(se.Err.Error(), "jsontext: ")
		}
		if errors.Is(se.Err, io.ErrUnexpectedEOF) || errors.Is(se.Err, io.EOF) {
			msg, off = "unexpected end of JSON input (truncated file?)", max(off, end)
		}
		return tr.errAt(off, "invalid chrome trace JSON: %s", msg)
	}
	// A failure of the reader below the decoder (gzip, the disk).
	for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(err) {
		err = u
	}
	msg := err.Error()
	if err == io.ErrUnexpectedEOF {
		msg = "unexpected end of input (truncated file?)"
	}
	return tr.errAt(end, "reading the input failed: %s", msg)
}

func (tr *traceReader) read() (*Snapshot, error) {
	switch tr.dec.PeekKind() {
	case '{':
		if err := tr.readTopObject(); err != nil {
			return nil, err
		}
	case '[':
		if _, err := tr.dec.ReadToken(); err != nil {
			return nil, tr.wrap(err)
		}
		switch k := tr.dec.PeekKind(); k {
		case '[':
			return tr.readMemoryTimeline()
		case '{', ']':
			if err := tr.readEvents("the top-level array"); err != nil {
				return nil, err
			}
			tr.hasEvents = true
		case 0:
			_, err := tr.dec.ReadToken()
			return nil, tr.wrap(err)
		default:
			return nil, tr.errAt(tr.nextOffset(), "a JSON array of %s, not of chrome trace events", jsonKindName(k))
		}
	case 0:
		_, err := tr.dec.ReadToken()
		return nil, tr.wrap(err)
	default:
		return nil, tr.errAt(0, "not a chrome trace: the JSON value is %s, not an object with traceEvents", jsonKindName(tr.dec.PeekKind()))
	}
	if err := tr.checkEOF(); err != nil {
		return nil, err
	}
	return tr.build()
}

// checkEOF fails on data after the top-level value.
func (tr *traceReader) checkEOF() error {
	off := tr.nextOffset()
	_, err := tr.dec.ReadToken()
	if err == io.EOF {
		return nil
	}
	if err == nil {
		return tr.errAt(off, "invalid chrome trace JSON: data after the top-level value")
	}
	return tr.wrap(err)
}

func jsonKindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "not JSON"
}

// readTopObject reads {"traceEvents": [...], ...}: top-level keys in file
// order (values of unknown keys are skipped unread), deviceProperties and
// baseTimeNanoseconds.
func (tr *traceReader) readTopObject() error {
	dec := tr.dec
	err := tr.eachMember(func(nv []byte) error {
		name := unquoteLenient(nv)
		if len(tr.keys) < 1000 {
			key := name
			if len(key) > 200 {
				key = key[:200]
			}
			tr.keys = append(tr.keys, key)
		}
		switch name {
		case "traceEvents":
			k := dec.PeekKind()
			valOff := tr.nextOffset()
			if k != '[' {
				if k == 0 {
					_, err := dec.ReadValue()
					return tr.wrap(err)
				}
				return tr.errAt(valOff, "not a chrome trace: traceEvents is %s, not an array", jsonKindName(k))
			}
			if _, err := dec.ReadToken(); err != nil {
				return tr.wrap(err)
			}
			if err := tr.readEvents("traceEvents"); err != nil {
				return err
			}
			tr.hasEvents = true
		case "deviceProperties":
			return tr.readDeviceProperties()
		case "distributedInfo":
			v, err := dec.ReadValue()
			if err != nil {
				return tr.wrap(err)
			}
			tr.dist = readDistributedInfo(v)
		case "baseTimeNanoseconds":
			if k := dec.PeekKind(); k == '{' || k == '[' {
				return tr.wrap(dec.SkipValue())
			}
			v, err := dec.ReadValue()
			if err != nil {
				return tr.wrap(err)
			}
			if n, ok := parseIntLenient(bytes.Trim(v, `"`)); ok {
				tr.baseNS, tr.hasBase = n, true
			}
		case "roctracer_version", "hip_runtime_version", "hip_driver_version":
			tr.rocm = true
			return tr.wrap(dec.SkipValue())
		default:
			return tr.wrap(dec.SkipValue())
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !tr.hasEvents {
		return tr.noEventsError()
	}
	return nil
}

// noEventsError explains a JSON object without traceEvents. It names at most
// a few keys (never values: user metadata can hold secrets).
func (tr *traceReader) noEventsError() error {
	has := func(k string) bool {
		for _, x := range tr.keys {
			if x == k {
				return true
			}
		}
		return false
	}
	if has("segments") || has("device_traces") {
		return tr.errAt(0, "a JSON object with segments/device_traces (a memory snapshot as JSON?), not a chrome trace: no traceEvents")
	}
	ks := tr.keys
	more := ""
	if len(ks) > 5 {
		ks, more = ks[:5], ", …"
	}
	q := make([]string, len(ks))
	for i, k := range ks {
		if len(k) > 40 {
			k = k[:40]
		}
		q[i] = fmt.Sprintf("%q", k)
	}
	return tr.errAt(0, "not a chrome trace: the JSON object has no traceEvents (keys: %s%s)", strings.Join(q, ", "), more)
}

// readDeviceProperties keeps id, name and totalGlobalMem of each device. It
// reads token by token: the list is never held whole, and what is not an
// array of objects is skipped.
func (tr *traceReader) readDeviceProperties() error {
	dec := tr.dec
	if dec.PeekKind() != '[' {
		return tr.wrap(dec.SkipValue())
	}
	if _, err := dec.ReadToken(); err != nil {
		return tr.wrap(err)
	}
	for {
		switch dec.PeekKind() {
		case ']':
			_, err := dec.ReadToken()
			return tr.wrap(err)
		case '{':
		default:
			if err := dec.SkipValue(); err != nil {
				return tr.wrap(err)
			}
			continue
		}
		id, hasID := int64(0), false
		var p devProp
		err := tr.eachMember(func(key []byte) error {
			name := string(key) // the key's bytes are the decoder's: read on
			if k := dec.PeekKind(); k == '{' || k == '[' {
				return tr.wrap(dec.SkipValue())
			}
			v, err := dec.ReadValue()
			if err != nil {
				return tr.wrap(err)
			}
			switch name {
			case `"id"`:
				id, hasID = parseIntLenient(bytes.Trim(v, `"`))
			case `"name"`:
				p.name = clipName(unquoteLenient(v))
			case `"totalGlobalMem"`:
				p.mem, _ = parseIntLenient(bytes.Trim(v, `"`))
			}
			return nil
		})
		if err != nil {
			return err
		}
		if hasID && len(tr.devProps) < 4*tr.opts.MaxDevices {
			tr.devProps[id] = p
			tr.hasDevProps = true
		}
	}
}

// clipName shortens a device name from the input to 200 bytes.
func clipName(s string) string {
	if len(s) > 200 {
		return s[:200]
	}
	return s
}

// unquoteLenient returns the text of a raw JSON string value (or the raw
// text of any other value).
func unquoteLenient(v []byte) string {
	if len(v) >= 2 && v[0] == '"' {
		if bytes.IndexByte(v, '\\') < 0 {
			return string(v[1 : len(v)-1])
		}
		out, _ := jsontext.AppendUnquote(nil, v)
		return string(out)
	}
	return string(v)
}

// put appends the text of a raw value to the arena: strings unquoted,
// anything else as written.
func (tr *traceReader) put(v []byte) field {
	off := len(tr.arena)
	if len(v) >= 2 && v[0] == '"' {
		if bytes.IndexByte(v, '\\') < 0 {
			tr.arena = append(tr.arena, v[1:len(v)-1]...)
		} else {
			tr.arena, _ = jsontext.AppendUnquote(tr.arena, v)
		}
	} else {
		tr.arena = append(tr.arena, v...)
	}
	return field{int32(off), int32(len(tr.arena) - off)}
}

func (tr *traceReader) bytesOf(f field) []byte {
	if f.n < 0 {
		return nil
	}
	return tr.arena[f.off : f.off+f.n]
}

// readEvents reads the events of an array whose '[' was consumed, up to and
// including its ']'.
func (tr *traceReader) readEvents(where string) error {
	tr.startRecording()
	defer func() {
		if p := tr.stopRecording(); p != nil {
			panic(p) // for readChromeTrace's recover, as if it had happened here
		}
	}()
	dec := tr.dec
	for i := 0; ; i++ {
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
		var dst *field
		switch string(key) {
		case `"ph"`:
			dst = &ev.ph
		case `"cat"`:
			dst = &ev.cat
		case `"name"`:
			dst = &ev.name
		case `"pid"`:
			dst = &ev.pid
		case `"tid"`:
			dst = &ev.tid
		case `"ts"`:
			dst = &ev.ts
		case `"dur"`:
			dst = &ev.dur
		case `"args"`:
			return tr.readArgs()
		}
		return tr.keepValue(dst, true)
	})
	if err != nil {
		return err
	}
	tr.seq++
	tr.queue()
	return nil
}

// eachMember reads the object that comes next, through its '}': visit gets
// each member's key as written (quotes and escapes included) and must read
// or skip the member's value.
func (tr *traceReader) eachMember(visit func(key []byte) error) error {
	dec := tr.dec
	if _, err := dec.ReadToken(); err != nil { // '{'
		return tr.wrap(err)
	}
	for {
		if k := tr.peekMember(); k == '}' || k == 0 { // the end, or the error that stops it
			_, err := dec.ReadToken()
			return tr.wrap(err)
		}
		key, err := dec.ReadValue()
		if err != nil {
			return tr.wrap(err)
		}
		if err := visit(key); err != nil {
			return err
		}
	}
}

// keepValue reads the value of the member being read into dst, or skips it
// when dst is nil; with scalarsOnly, an object or array is skipped token by
// token (never held whole) and ignored.
func (tr *traceReader) keepValue(dst *field, scalarsOnly bool) error {
	if dst == nil {
		return tr.wrap(tr.dec.SkipValue())
	}
	if scalarsOnly {
		if k := tr.peekValue(); k == '{' || k == '[' {
			return tr.wrap(tr.dec.SkipValue())
		}
	}
	v, err := tr.dec.ReadValue()
	if err != nil {
		return tr.wrap(err)
	}
	if scalarsOnly && (v[0] == '{' || v[0] == '[') {
		return nil // not a scalar: ignore the field
	}
	*dst = tr.put(v)
	return nil
}

// peekValue is the first byte of the next value when the decoder's buffer
// holds it (after the member's colon), else the decoder's PeekKind.
func (tr *traceReader) peekValue() byte {
	for _, c := range tr.dec.UnreadBuffer() {
		switch c {
		case ' ', '\t', '\r', '\n', ':':
			continue
		}
		return c
	}
	return byte(tr.dec.PeekKind())
}

// peekMember is dec.PeekKind inside an object, answered from the decoder's
// buffer when the next member's key is already there (the common case, and
// a third of the reader's calls into the decoder). The decoder still checks
// the syntax of everything it is then asked to read.
func (tr *traceReader) peekMember() jsontext.Kind {
	ub := tr.dec.UnreadBuffer()
	for _, c := range ub {
		switch c {
		case ' ', '\t', '\r', '\n', ',':
			continue
		case '"':
			return '"'
		}
		break
	}
	return tr.dec.PeekKind()
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
		var dst *field
		switch string(key) {
		case `"Device Type"`:
			dst = &ev.devType
		case `"Device Id"`:
			dst = &ev.devID
		case `"Addr"`:
			dst = &ev.addr
		case `"Bytes"`:
			dst = &ev.bytes
		case `"Total Allocated"`:
			dst = &ev.ta
		case `"Total Reserved"`:
			dst = &ev.tr
		case `"Input Dims"`:
			dst = &ev.inputDims
		case `"Input type"`:
			dst = &ev.inputType
		case `"Call stack"`:
			dst = &ev.callStack
		case `"name"`:
			dst = &ev.argName
		case `"Profiler Event Index"`:
			tr.profEvIdx = true
		case `"Record function id"`:
			tr.recordFnID = true
		case `"Ev Idx"`:
			tr.evIdx = true
		}
		return tr.keepValue(dst, false)
	})
}

// intern returns the index of a name in tr.names.
func (tr *traceReader) intern(b []byte) int32 {
	if id, ok := tr.nameIdx[string(b)]; ok {
		return id
	}
	id := int32(len(tr.names))
	s := string(b)
	tr.names = append(tr.names, s)
	tr.nameIdx[s] = id
	return id
}

// thread returns the index of the (pid, tid) thread, creating it.
func (tr *traceReader) thread(pid, tid []byte) int32 {
	tr.keyBuf = append(append(append(tr.keyBuf[:0], pid...), 0), tid...)
	if id, ok := tr.threadIdx[string(tr.keyBuf)]; ok {
		return id
	}
	id := int32(len(tr.threads))
	tr.threads = append(tr.threads, &traceThread{pid: string(pid), tid: string(tid)})
	tr.threadIdx[string(tr.keyBuf)] = id
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
		start, ok := parseTimeNS(tr.recBytes(ev.ts))
		if !ok {
			tr.badTimes++
			return
		}
		dur, ok := parseTimeNS(tr.recBytes(ev.dur))
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
		t.spans = append(t.spans, sp)
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
	ts, ok := parseTimeNS(tr.recBytes(ev.ts))
	if !ok {
		tr.badTimes++
		return
	}
	typ, ok1 := parseIntLenient(tr.recBytes(ev.devType))
	id, ok2 := parseIntLenient(tr.recBytes(ev.devID))
	n, ok3 := parseIntLenient(tr.recBytes(ev.bytes))
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
	m := memRec{ts: ts, bytes: n, thread: tr.thread(tr.recBytes(ev.pid), tr.recBytes(ev.tid))}
	if oom {
		m.flags |= memOOM
	}
	if ev.addr.ok() {
		if a, ok := parseUintLenient(tr.recBytes(ev.addr)); ok {
			m.addr = a
			m.flags |= memHasAddr
			tr.memAddr = true
		}
	}
	if v, ok := parseIntLenient(tr.recBytes(ev.ta)); ok {
		m.ta = v
		m.flags |= memHasTA
	}
	if v, ok := parseIntLenient(tr.recBytes(ev.tr)); ok {
		m.tr = v
		m.flags |= memHasTR
	}
	k := devKey{typ, id}
	if typ == 0 {
		k.id = -1
	}
	if di, ok := tr.devIdx[k]; ok {
		m.dev = di
	} else if len(tr.devKeys) >= tr.opts.MaxDevices {
		tr.devOverflow = true // build refuses the file
		return
	} else {
		m.dev = int32(len(tr.devKeys))
		tr.devKeys = append(tr.devKeys, k)
		tr.devIdx[k] = m.dev
	}
	idx := int32(len(tr.mem))
	tr.mem = append(tr.mem, m)
	t := tr.threads[m.thread]
	t.mem = append(t.mem, idx)
}
