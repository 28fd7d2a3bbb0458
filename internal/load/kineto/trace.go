package kineto

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/torchmem/torchmem/internal/load/jsonlex"
	"github.com/torchmem/torchmem/internal/load/readahead"
	"github.com/torchmem/torchmem/snapshot"
)

// This file is the Kineto chrome-trace reader: it streams the
// tokens of {"traceEvents": [...]} (or a bare array of events) and decodes
// one event at a time into compact records; trace_build.go turns those into
// the model (the eras it tells apart: the package documentation). Here is the
// reader itself and its errors; trace_top.go reads the top-level object,
// trace_events.go the events, trace_tokens.go the tokens, and
// trace_records.go files what they hold.

// Read decodes a Kineto chrome trace, .json or gzip, from the 2021
// format to today, or the raw export of torch.profiler's
// export_memory_timeline (a JSON array of [t_ns, action, bytes, category]).
// lead is the number of input bytes already consumed (leading whitespace).
func Read(in *bufio.Reader, src snapshot.Source, opts snapshot.Options, lead int64) (*snapshot.Snapshot, error) {
	return read(in, src, opts, lead, true)
}

// read is Read; without fast, the events are read by the decoder alone
// (the reference the fast path is tested against).
func read(in *bufio.Reader, src snapshot.Source, opts snapshot.Options, lead int64, fast bool) (s *snapshot.Snapshot, err error) {
	opts = opts.WithDefaults()
	var tr *traceReader
	defer func() {
		if r := recover(); r != nil {
			s = nil
			err = &snapshot.Error{Path: src.Path, Offset: tr.offset(), Msg: fmt.Sprintf("malformed chrome trace (reader failure: %v)", r)}
		}
	}()
	tr = newTraceReader(in, src, opts, fast)
	tr.skip += lead
	defer tr.ra.Stop()
	return tr.read()
}

// field is a piece of traceReader.arena: the unquoted text of one value.
type field struct{ off, n int32 }

var noField = field{0, -1}

// numField as a field's n: the value is a plain JSON integer (an optional
// minus and at most 18 digits: lexInt) that the events' fast path parsed as
// it read it; the arena holds it at off in 8 bytes, little-endian, instead
// of its text (recInt, recUint and recTime read either, with the same
// result).
const numField = -2

func (f field) ok() bool { return f.n >= 0 || f.n == numField }

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
	src  snapshot.Source
	opts snapshot.Options
	ra   *readahead.Reader // reads through the sanitiser, on a goroutine of its own
	san  *jsonlex.Sanitizer
	dec  *jsontext.Decoder
	// decBase is what to add to an offset of tr.dec's text for the offset
	// in the sanitiser's output: tr.dec may be a decoder resumed after the
	// fast path (fastlex.go), whose text starts with a short prefix.
	decBase int64
	decIn   io.Reader // what tr.dec reads
	lex     *lexBuf   // the fast path's text while it reads
	fast    bool      // read events with the fast path
	// sanFused: the sanitiser runs on this goroutine, after the read-ahead,
	// so that the fast path can read and sanitise the events by itself;
	// without the fast path it runs on the read-ahead's goroutine.
	sanFused bool
	skip     int64 // bytes skipped before the decoder (leading whitespace, a UTF-8 BOM)

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
	memEv      []snapshot.Event // time (relative), address, bytes, stack and op of each of mem
	devKeys    []devKey
	devIdx     map[devKey]uint16
	grads      []gradRec
	// Totals of the [memory] records that their device's records before
	// them do not tell (records.go, keepCounters), in file order.
	taVals, trVals []counterVal
	devCounters    []counters // per device: its totals so far
	devWalks       []*devWalk // per device key: its device's walk (devices.go)

	keys        []string
	moreKeys    int // top-level keys past the 1,000 kept in keys
	baseNS      int64
	hasBase     bool
	rocm        bool
	hasEvents   bool
	hasDevProps bool
	devProps    map[int64]devProp
	dist        *snapshot.Distributed

	// fingerprints
	legacyCats, memNoCat, profEvIdx, asyncCPU2GPU, recordFnID, evIdx, modernFlows, memAddr, hasPython bool
	badTimes, badMem, zeroBytes                                                                       int

	devOverflow bool  // [memory] events on more devices than Options.MaxDevices
	lastThread  int32 // the thread the last look-up found (−1: none yet)
}

type devProp struct {
	name  string
	mem   int64
	major int
}

func newTraceReader(in *bufio.Reader, src snapshot.Source, opts snapshot.Options, fast bool) *traceReader {
	tr := &traceReader{
		src:        src,
		opts:       opts,
		fast:       fast,
		sanFused:   fast,
		nameIdx:    make(map[string]int32),
		csIdx:      make(map[string]int32),
		threadIdx:  make(map[string]int32),
		threadName: make(map[string]string),
		devProps:   make(map[int64]devProp),
		devIdx:     make(map[devKey]uint16),
		lastThread: -1,
	}
	// Size the [memory] records from the file size (a record is about 300
	// bytes of JSON): growing the slice would copy it over and over, while
	// capacity never written costs address space, not memory.
	if est := src.FileBytes / 300; src.FileBytes > 0 && !src.Gzipped {
		tr.mem = make([]memRec, 0, min(est, 1<<26))
		tr.memEv = make([]snapshot.Event, 0, min(est, 1<<26))
	}
	if head, _ := in.Peek(3); len(head) == 3 && head[0] == 0xef && head[1] == 0xbb && head[2] == 0xbf {
		in.Discard(3)
		tr.skip = 3
	}
	if tr.sanFused {
		tr.ra = readahead.NewReader(in, nil)
		tr.san = jsonlex.NewSanitizer(tr.ra, opts.MaxDepth, opts.MaxStringBytes)
		tr.decIn = tr.san
	} else {
		san := jsonlex.NewSanitizer(in, opts.MaxDepth, opts.MaxStringBytes)
		tr.san = san
		tr.ra = readahead.NewReader(san, func() int64 { return san.Replaced() })
		tr.decIn = tr.ra
	}
	tr.dec = newDecoder(tr.decIn)
	return tr
}

// delivered is the number of bytes of the sanitiser's output read so far
// (at the end of the input, all of them).
func (tr *traceReader) delivered() int64 {
	if tr.sanFused {
		return tr.san.Out()
	}
	return tr.ra.Delivered()
}

// replaced is the number of control bytes read as spaces so far.
func (tr *traceReader) replaced() int64 {
	if tr.sanFused {
		return tr.san.Replaced()
	}
	return tr.ra.Tag()
}

// offset is the input offset of the last value read.
func (tr *traceReader) offset() int64 {
	if tr == nil || tr.dec == nil {
		return -1
	}
	if tr.lex != nil {
		return tr.inputOffset(tr.lex.base)
	}
	return tr.inputOffset(tr.dec.InputOffset() + tr.decBase)
}

// inputOffset maps an offset of the sanitiser's output to the offset in
// the (decompressed) input.
func (tr *traceReader) inputOffset(dec int64) int64 {
	return tr.san.RawOffset(dec) + tr.skip
}

// nextOffset is the input offset of the next value (after a PeekKind).
func (tr *traceReader) nextOffset() int64 {
	off := tr.dec.InputOffset() + tr.decBase
	for _, c := range tr.dec.UnreadBuffer() {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != ':' && c != ',' {
			break
		}
		off++
	}
	return tr.inputOffset(off)
}

// errAt makes an *Error at a byte offset of the decompressed input.
func (tr *traceReader) errAt(off int64, format string, args ...any) *snapshot.Error {
	return &snapshot.Error{Path: tr.src.Path, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// wrap turns a decoder or read error into an *Error with its byte offset;
// errTooLarge is returned as is for Read to report.
func (tr *traceReader) wrap(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, snapshot.ErrInputTooLarge) {
		return snapshot.ErrInputTooLarge
	}
	var e *snapshot.Error
	if errors.As(err, &e) {
		return e
	}
	var le *jsonlex.LimitError
	if errors.As(err, &le) {
		return tr.errAt(le.Offset+tr.skip, "invalid chrome trace JSON: %s", le.Error())
	}
	end := tr.inputOffset(tr.delivered()) // bytes the decoder was given
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		off := tr.inputOffset(se.ByteOffset + tr.decBase)
		msg := "syntax error"
		if se.Err != nil {
			msg = cutEscape(strings.TrimPrefix(se.Err.Error(), "jsontext: "))
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

func (tr *traceReader) read() (*snapshot.Snapshot, error) {
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
