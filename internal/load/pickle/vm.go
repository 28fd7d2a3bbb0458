package pickle

import (
	"encoding/binary"
	"fmt"

	"github.com/torchmem/torchmem/snapshot"
)

// This file is the opcode machine of torchmem's own pickle decoder. It
// implements the data opcodes of protocols 0–5 and refuses every opcode that
// would import or call code. Containers are reduced into the model as soon as
// they are appended to a list (see pickle_schema.go), so a multi-GB snapshot
// never exists as a generic object tree.

// opcode names for messages.
var opNames = map[byte]string{
	'(': "MARK", '.': "STOP", '0': "POP", '1': "POP_MARK", '2': "DUP", 'F': "FLOAT", 'I': "INT",
	'J': "BININT", 'K': "BININT1", 'L': "LONG", 'M': "BININT2", 'N': "NONE", 'P': "PERSID",
	'Q': "BINPERSID", 'R': "REDUCE", 'S': "STRING", 'T': "BINSTRING", 'U': "SHORT_BINSTRING",
	'V': "UNICODE", 'X': "BINUNICODE", 'a': "APPEND", 'b': "BUILD", 'c': "GLOBAL", 'd': "DICT",
	'}': "EMPTY_DICT", 'e': "APPENDS", 'g': "GET", 'h': "BINGET", 'i': "INST", 'j': "LONG_BINGET",
	'l': "LIST", ']': "EMPTY_LIST", 'o': "OBJ", 'p': "PUT", 'q': "BINPUT", 'r': "LONG_BINPUT",
	's': "SETITEM", 't': "TUPLE", ')': "EMPTY_TUPLE", 'u': "SETITEMS", 'G': "BINFLOAT",
	0x80: "PROTO", 0x81: "NEWOBJ", 0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4", 0x85: "TUPLE1",
	0x86: "TUPLE2", 0x87: "TUPLE3", 0x88: "NEWTRUE", 0x89: "NEWFALSE", 0x8a: "LONG1", 0x8b: "LONG4",
	'B': "BINBYTES", 'C': "SHORT_BINBYTES", 0x8c: "SHORT_BINUNICODE", 0x8d: "BINUNICODE8",
	0x8e: "BINBYTES8", 0x8f: "EMPTY_SET", 0x90: "ADDITEMS", 0x91: "FROZENSET", 0x92: "NEWOBJ_EX",
	0x93: "STACK_GLOBAL", 0x94: "MEMOIZE", 0x95: "FRAME", 0x96: "BYTEARRAY8", 0x97: "NEXT_BUFFER",
	0x98: "READONLY_BUFFER",
}

// opNameTable indexes opcode names by byte: opName runs on hot paths
// (it names the opcode in errors that may never happen).
var opNameTable = func() (t [256]string) {
	for i := range t {
		t[i] = fmt.Sprintf("unknown opcode 0x%02x", i)
	}
	for op, n := range opNames {
		t[op] = n
	}
	return t
}()

// OpName is the name of a pickle opcode (as pickletools writes it), for
// error messages and tests.
func OpName(op byte) string { return opNameTable[op] }

// maxLongBytes bounds LONG1/LONG4 integers: snapshot integers fit in 9 bytes.
const maxLongBytes = 1024

// vm decodes one pickle stream.
type vm struct {
	in        *inbuf
	off       int64 // bytes consumed
	opOff     int64 // offset of the current opcode
	stack     []value
	marks     []int
	memo      memoTable
	proto     int
	opts      snapshot.Options
	path      string
	sch       *schema
	buf       []byte
	curOp     byte
	freeDicts []*pdict
	freeLists []*plist
	frameRun  []snapshot.FrameID // scratch of appendFrameRun
	fast      struct {           // entryFast: its scratch, whether it is off, what it took
		dict   pdict
		frames []snapshot.FrameID
		memo   []value
		texts  []uint32 // beside memo: a short string's text number + 1, else 0
		// keyRoles is the role of each key of the entry (beside dict.keys);
		// roles the keys' roles by their text numbers.
		keyRoles []keyRole
		roles    roleCache
		// tmpl are the entry templates (see entryByTemplate), learn their
		// learner beside the general fast path, actions the actions by
		// text number; noTemplate turns the template off (tests).
		tmpl       entryTemplates
		learn      templateLearner
		actions    actionCache
		noTemplate bool
		templated  int // entries taken by the template
		// stream is the last stream the template interned: its handle
		// and ID.
		stream struct {
			raw   uint64
			id    uint16
			known bool
		}
		// lastList is the frames list, written out, of the last entry
		// taken with one: its bytes, its stack and memoTable.overwrites
		// when its fetches were read.
		lastList struct {
			bytes []byte
			stack snapshot.StackID
			gen   uint64
		}
		listHits int // entries whose list was lastList's
		off      bool
		entries  int
	}
	held     int64 // bytes of containers and dict entries outside the model (see hold)
	maxStack int   // the most values the stack may hold (MaxValues and MaxValueBytes)
	// split is the second decoder while it runs (split.go); splitAt the
	// entries the template takes before one starts (MaxInt: never);
	// splitTook the entries it read that were kept; release drops the
	// mapped pages it has passed.
	split     *split
	splitAt   int
	splitTook int
	splitTune splitTune
	release   func(from, to int)
}

func (m *vm) fail(format string, args ...any) error {
	return &snapshot.Error{Path: m.path, Offset: m.opOff, Msg: fmt.Sprintf(format, args...)}
}

func (m *vm) truncated(what string) error {
	return &snapshot.Error{Path: m.path, Offset: m.off, Msg: "truncated pickle: file ends inside " + what}
}

func (m *vm) push(v value) { m.stack = append(m.stack, v) }

func (m *vm) pop() (value, error) {
	base := 0
	if len(m.marks) > 0 {
		base = m.marks[len(m.marks)-1]
	}
	if len(m.stack) <= base {
		return value{}, m.fail("%s on an empty stack", OpName(m.curOp))
	}
	v := m.stack[len(m.stack)-1]
	m.stack = m.stack[:len(m.stack)-1]
	return v, nil
}

func (m *vm) top() (*value, error) {
	base := 0
	if len(m.marks) > 0 {
		base = m.marks[len(m.marks)-1]
	}
	if len(m.stack) <= base {
		return nil, m.fail("%s on an empty stack", OpName(m.curOp))
	}
	return &m.stack[len(m.stack)-1], nil
}

// popMark returns the items above the last MARK and removes them and the mark.
func (m *vm) popMark() ([]value, error) {
	if len(m.marks) == 0 {
		return nil, m.fail("%s without a MARK", OpName(m.curOp))
	}
	at := m.marks[len(m.marks)-1]
	m.marks = m.marks[:len(m.marks)-1]
	items := m.stack[at:]
	m.stack = m.stack[:at]
	return items, nil
}

// memoPut stores v at memo entry idx. Entries are indexes: one past the
// last fills the ones before it, and no index reaches MaxMemo, so the memo
// never holds more than MaxMemo entries of memoBytesPerEntry each.
func (m *vm) memoPut(idx int, v value) error {
	if idx < 0 || idx >= m.opts.MaxMemo {
		return m.fail("%s of memo entry %d: more than %d memo entries, more than a snapshot of this size holds (limit snapshot.Options.MaxMemo)", OpName(m.curOp), idx, m.opts.MaxMemo)
	}
	m.memo.set(idx, v)
	switch v.k {
	case kDict:
		if d := v.dict(); d.memo == 0 {
			d.memo = idx + 1
		}
	case kList:
		if l := v.list(); l.memo == 0 {
			l.memo = idx + 1
		} else if l.memo != idx+1 {
			l.gets++ // a second slot keeps it after its first is replaced: never reused
		}
	}
	return nil
}

func (m *vm) memoGet(idx int) (value, error) {
	var v value
	ok := false
	if idx >= 0 && idx < m.memo.len() {
		v, ok = m.memo.get(idx)
	}
	if !ok {
		return value{}, m.fail("%s of memo entry %d, which was never stored", OpName(m.curOp), idx)
	}
	if v.k == kGone {
		return value{}, m.fail("%s of memo entry %d, a trace entry or block referenced twice (not produced by PyTorch)", OpName(m.curOp), idx)
	}
	return v, nil
}

// replaceMemo swaps a reduced container's memo slot for its compact form.
func (m *vm) replaceMemo(memo int, v value) {
	if memo == 0 {
		return
	}
	idx := memo - 1
	if idx < m.memo.len() {
		m.memo.set(idx, v)
	}
}

// refused are the opcodes that import or call code. No snapshot has one.
var refused = func() (r [256]bool) {
	for _, op := range []byte{'c', 0x93, 'R', 'i', 'o', 0x81, 0x92, 'b', 'P', 'Q', 0x82, 0x83, 0x84, 0x97, 0x98} {
		r[op] = true
	}
	return r
}()

// run executes opcodes until STOP and returns the result.
func (m *vm) run() (value, error) {
	for {
		m.opOff = m.off
		in := m.in
		if in.pos == in.end && !in.fill(1) {
			if m.off == 0 {
				return value{}, &snapshot.Error{Path: m.path, Offset: 0, Msg: "empty pickle"}
			}
			return value{}, m.readErr(in.failure(), "the pickle: no STOP opcode")
		}
		op := in.buf[in.pos]
		in.pos++
		// The commonest opcodes of a snapshot run inline.
		if op == 'h' && in.pos < in.end {
			m.off += 2
			m.curOp = op
			if err := m.pushMemo(int(in.buf[in.pos])); err != nil {
				return value{}, err
			}
			in.pos++
			continue
		}
		if op == 'j' && in.end-in.pos >= 4 { // LONG_BINGET: frames past memo entry 255
			m.off += 5
			m.curOp = op
			idx := binary.LittleEndian.Uint32(in.buf[in.pos:])
			in.pos += 4
			if err := m.pushMemo(int(idx)); err != nil {
				return value{}, err
			}
			continue
		}
		if op == '}' && !m.fast.off && m.entryFast() {
			if m.sch.err != nil {
				return value{}, m.sch.err
			}
			continue
		}
		if op == '(' && len(m.marks) < m.opts.MaxDepth {
			m.off++
			if m.appendFrameRun() {
				continue
			}
			m.marks = append(m.marks, len(m.stack))
			continue
		}
		m.off++
		m.curOp = op
		if refused[op] {
			return value{}, m.fail("refusing pickle opcode %s (0x%02x): it would import or call code, and snapshots never need that", OpName(op), op)
		}
		if op == '.' {
			if len(m.marks) > 0 {
				return value{}, m.fail("STOP with an open MARK")
			}
			if len(m.stack) != 1 {
				return value{}, m.fail("STOP with %d values on the stack, want 1", len(m.stack))
			}
			return m.stack[0], nil
		}
		if err := m.step(op); err != nil {
			return value{}, err
		}
		if m.sch.err != nil {
			return value{}, m.sch.err
		}
		if len(m.stack)+m.sch.generic > m.opts.MaxValues {
			return value{}, m.fail("more than %d pickle values that are not snapshot records: not a snapshot PyTorch wrote (limit snapshot.Options.MaxValues)", m.opts.MaxValues)
		}
		if m.heldBytes() > m.opts.MaxValueBytes {
			return value{}, m.fail("pickle values that are not snapshot records hold more than %d bytes: not a snapshot PyTorch wrote (limit snapshot.Options.MaxValueBytes)", m.opts.MaxValueBytes)
		}
	}
}

// pushMemo pushes memo entry idx: frames, stacks and live objects directly,
// anything else through memoGet's checks.
func (m *vm) pushMemo(idx int) error {
	if len(m.stack) >= m.maxStack {
		return m.fail("more than %d pickle values on the stack: not a snapshot PyTorch wrote (limit snapshot.Options.MaxValues)", m.maxStack)
	}
	if idx < m.memo.len() {
		sl := m.memo.slot(idx)
		switch sl & slotMask {
		case slotObj:
			v := m.memo.obj(uint32(sl &^ slotMask))
			switch v.k {
			case kDict:
				v.dict().gets++
			case kList:
				v.list().gets++
			}
			m.stack = append(m.stack, v)
			return nil
		case slotFrame:
			m.stack = append(m.stack, value{k: kFrame, n: int64(sl &^ slotMask)})
			return nil
		case slotStack:
			m.stack = append(m.stack, value{k: kStack, n: int64(sl &^ slotMask)})
			return nil
		}
	}
	v, err := m.memoGet(idx)
	if err != nil {
		return err
	}
	switch v.k {
	case kDict:
		v.dict().gets++
	case kList:
		v.list().gets++
	}
	m.push(v)
	return nil
}

// appendFrameRun is the fast path of a trace entry's frames list, the bulk
// of every snapshot: MARK, memo fetches of frames already reduced, APPENDS.
// Called just after a MARK, it appends the frames straight to the list on
// top of the stack, without pushing a value for each, when the batch is
// exactly that; otherwise it consumes nothing and returns false, and the
// opcodes run one by one as usual.
func (m *vm) appendFrameRun() bool {
	base := 0
	if len(m.marks) > 0 {
		base = m.marks[len(m.marks)-1]
	}
	if len(m.stack) <= base {
		return false
	}
	t := &m.stack[len(m.stack)-1]
	if t.k != kList || len(t.list().items) != 0 {
		return false
	}
	l := t.list()
	in := m.in
	pos := in.pos
	run := m.frameRun[:0] // gathered apart: the list grows once, to its size
	// A batch longer than MaxValues is left to the slow path, which refuses it.
	for pos < in.end && len(run) < m.opts.MaxValues {
		var idx, n int
		switch in.buf[pos] {
		case 'j':
			if in.end-pos < 5 {
				break
			}
			idx, n = int(binary.LittleEndian.Uint32(in.buf[pos+1:])), 5
		case 'h':
			if in.end-pos < 2 {
				break
			}
			idx, n = int(in.buf[pos+1]), 2
		}
		if n == 0 || idx >= m.memo.len() {
			break
		}
		sl := m.memo.slot(idx)
		if sl&slotMask != slotFrame {
			break
		}
		run = append(run, snapshot.FrameID(sl&^slotMask))
		pos += n
	}
	m.frameRun = run
	if pos > in.pos && pos < in.end && in.buf[pos] == 'e' {
		l.frames = append(l.frames, run...)
		m.off += int64(pos + 1 - in.pos)
		in.pos = pos + 1
		return true
	}
	return false
}
