package snapshot

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"unsafe"
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

func opName(op byte) string { return opNameTable[op] }

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
	opts      Options
	path      string
	sch       *schema
	buf       []byte
	curOp     byte
	freeDicts []*pdict
	freeLists []*plist
	frameRun  []FrameID // scratch of appendFrameRun
	fast      struct {  // entryFast: its scratch, whether it is off, what it took
		dict    pdict
		frames  []FrameID
		memo    []value
		off     bool
		entries int
	}
	held     int64 // bytes of containers and dict entries outside the model (see hold)
	maxStack int   // the most values the stack may hold (MaxValues and MaxValueBytes)
}

func (m *vm) fail(format string, args ...any) error {
	return &Error{Path: m.path, Offset: m.opOff, Msg: fmt.Sprintf(format, args...)}
}

func (m *vm) truncated(what string) error {
	return &Error{Path: m.path, Offset: m.off, Msg: "truncated pickle: file ends inside " + what}
}

func (m *vm) push(v value) { m.stack = append(m.stack, v) }

func (m *vm) pop() (value, error) {
	base := 0
	if len(m.marks) > 0 {
		base = m.marks[len(m.marks)-1]
	}
	if len(m.stack) <= base {
		return value{}, m.fail("%s on an empty stack", opName(m.curOp))
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
		return nil, m.fail("%s on an empty stack", opName(m.curOp))
	}
	return &m.stack[len(m.stack)-1], nil
}

// popMark returns the items above the last MARK and removes them and the mark.
func (m *vm) popMark() ([]value, error) {
	if len(m.marks) == 0 {
		return nil, m.fail("%s without a MARK", opName(m.curOp))
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
		return m.fail("%s of memo entry %d: more than %d memo entries, more than a snapshot of this size holds (limit snapshot.Options.MaxMemo)", opName(m.curOp), idx, m.opts.MaxMemo)
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
		return value{}, m.fail("%s of memo entry %d, which was never stored", opName(m.curOp), idx)
	}
	if v.k == kGone {
		return value{}, m.fail("%s of memo entry %d, a trace entry or block referenced twice (not produced by PyTorch)", opName(m.curOp), idx)
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
				return value{}, &Error{Path: m.path, Offset: 0, Msg: "empty pickle"}
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
			return value{}, m.fail("refusing pickle opcode %s (0x%02x): it would import or call code, and snapshots never need that", opName(op), op)
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

func (m *vm) step(op byte) error {
	switch op {
	case 0x80: // PROTO
		p, err := m.uint(1, "PROTO")
		if err != nil {
			return err
		}
		if p > 5 {
			return m.fail("unsupported pickle protocol %d (newest is 5)", p)
		}
		m.proto = int(p)
	case 0x95: // FRAME: a read-ahead hint
		if _, err := m.uint(8, "FRAME"); err != nil {
			return err
		}
	case '(':
		if len(m.marks) >= m.opts.MaxDepth {
			return m.fail("more than %d nested MARKs", m.opts.MaxDepth)
		}
		m.marks = append(m.marks, len(m.stack))
	case '0':
		_, err := m.pop()
		return err
	case '1':
		_, err := m.popMark()
		return err
	case '2': // DUP shares the container, like a memo fetch
		t, err := m.top()
		if err != nil {
			return err
		}
		switch t.k {
		case kDict:
			t.dict().gets++
		case kList:
			t.list().gets++
		}
		m.push(*t)
	case 'N':
		m.push(value{k: kNone})
	case 0x88:
		m.push(value{k: kBool, n: 1})
	case 0x89:
		m.push(value{k: kBool})
	case 'K':
		if !m.in.fill(1) {
			return m.readErr(m.in.failure(), "BININT1")
		}
		b := m.in.buf[m.in.pos]
		m.in.pos++
		m.off++
		m.push(value{k: kInt, n: int64(b)})
	case 'M':
		v, err := m.uint(2, "BININT2")
		if err != nil {
			return err
		}
		m.push(value{k: kInt, n: int64(v)})
	case 'J':
		v, err := m.uint(4, "BININT")
		if err != nil {
			return err
		}
		m.push(value{k: kInt, n: int64(int32(uint32(v)))})
	case 0x8a, 0x8b: // LONG1, LONG4
		var n uint64
		var err error
		if op == 0x8a {
			n, err = m.uint(1, "LONG1")
		} else {
			n, err = m.uint(4, "LONG4")
		}
		if err != nil {
			return err
		}
		if n > maxLongBytes {
			return m.fail("%s integer of %d bytes (at most %d supported; snapshot integers fit in 9)", opName(op), n, maxLongBytes)
		}
		b, err := m.readN(int64(n), opName(op))
		if err != nil {
			return err
		}
		m.push(decodeLong(b))
	case 'G':
		v, err := m.uint(8, "BINFLOAT")
		if err != nil {
			return err
		}
		m.push(value{k: kFloat, n: int64(bswap(v))})
	case 'I', 'L', 'F':
		return m.textNumber(op)
	case 0x8c, 'X', 0x8d: // SHORT_BINUNICODE, BINUNICODE, BINUNICODE8
		w := 1
		switch op {
		case 'X':
			w = 4
		case 0x8d:
			w = 8
		}
		n, err := m.uint(w, opName(op))
		if err != nil {
			return err
		}
		s, err := m.str(n, opName(op))
		if err != nil {
			return err
		}
		m.push(strVal(kStr, s))
	case 'U', 'T', 'C', 'B', 0x8e, 0x96: // byte strings
		w := 1
		switch op {
		case 'T', 'B':
			w = 4
		case 0x8e, 0x96:
			w = 8
		}
		n, err := m.uint(w, opName(op))
		if err != nil {
			return err
		}
		s, err := m.str(n, opName(op))
		if err != nil {
			return err
		}
		if op == 'U' || op == 'T' {
			m.push(strVal(kStr, s))
		} else {
			m.push(strVal(kBytes, s))
		}
	case 'V', 'S': // protocol 0 text strings
		line, err := m.readLine(opName(op))
		if err != nil {
			return err
		}
		if op == 'S' {
			if u, err := strconv.Unquote(pyQuoteToGo(line)); err == nil {
				line = u
			}
		}
		m.push(strVal(kStr, line))
	case '}':
		m.held += dictBytes
		m.push(value{k: kDict, p: unsafe.Pointer(m.newDict())})
	case ']', 0x8f:
		m.held += listBytes
		m.push(value{k: kList, p: unsafe.Pointer(m.newList())})
	case ')':
		m.held += listBytes
		m.push(value{k: kTuple, p: unsafe.Pointer(&plist{})})
	case 'd', 'l', 't', 0x91: // DICT, LIST, TUPLE, FROZENSET from mark
		items, err := m.popMark()
		if err != nil {
			return err
		}
		switch op {
		case 'd':
			if len(items)%2 != 0 {
				return m.fail("DICT with an odd number (%d) of keys and values", len(items))
			}
			d := &pdict{}
			m.held += dictBytes + entryBytes*int64(len(items)/2)
			for i := 0; i < len(items); i += 2 {
				d.keys = append(d.keys, items[i])
				d.vals = append(d.vals, items[i+1])
			}
			m.push(value{k: kDict, p: unsafe.Pointer(d)})
		case 't':
			m.held += listBytes + valueBytes*int64(len(items))
			m.push(value{k: kTuple, p: unsafe.Pointer(&plist{items: append([]value(nil), items...)})})
		default:
			m.held += listBytes
			l := &plist{}
			for _, it := range items {
				m.sch.appendItem(l, it)
			}
			m.push(value{k: kList, p: unsafe.Pointer(l)})
		}
	case 0x85, 0x86, 0x87: // TUPLE1-3
		n := int(op - 0x84)
		base := 0
		if len(m.marks) > 0 {
			base = m.marks[len(m.marks)-1]
		}
		if len(m.stack)-base < n {
			return m.fail("%s needs %d values on the stack", opName(op), n)
		}
		items := append([]value(nil), m.stack[len(m.stack)-n:]...)
		m.stack = m.stack[:len(m.stack)-n]
		m.held += listBytes + valueBytes*int64(n)
		m.push(value{k: kTuple, p: unsafe.Pointer(&plist{items: items})})
	case 'a': // APPEND
		v, err := m.pop()
		if err != nil {
			return err
		}
		t, err := m.top()
		if err != nil {
			return err
		}
		if t.k != kList {
			return m.fail("APPEND to a %s, not a list", kindName(t.k))
		}
		m.sch.appendItem(t.list(), v)
	case 'e', 0x90: // APPENDS, ADDITEMS
		items, err := m.popMark()
		if err != nil {
			return err
		}
		t, err := m.top()
		if err != nil {
			return err
		}
		if t.k != kList {
			return m.fail("%s to a %s, not a list", opName(op), kindName(t.k))
		}
		l := t.list()
		if len(items) > 0 && items[0].k == kFrame && len(l.items) == 0 {
			l.frames = slices.Grow(l.frames, len(items)) // one allocation for the batch
		}
		for i, it := range items {
			if it.k == kFrame && len(l.items) == 0 {
				l.frames = append(l.frames, FrameID(it.n))
				continue
			}
			m.sch.appendItem(l, items[i])
		}
		clear(items)
	case 's': // SETITEM
		v, err := m.pop()
		if err != nil {
			return err
		}
		k, err := m.pop()
		if err != nil {
			return err
		}
		t, err := m.top()
		if err != nil {
			return err
		}
		if t.k != kDict {
			return m.fail("SETITEM on a %s, not a dict", kindName(t.k))
		}
		d := t.dict()
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, v)
		d.shaped = false
		m.held += entryBytes
	case 'u': // SETITEMS
		items, err := m.popMark()
		if err != nil {
			return err
		}
		if len(items)%2 != 0 {
			return m.fail("SETITEMS with an odd number (%d) of keys and values", len(items))
		}
		t, err := m.top()
		if err != nil {
			return err
		}
		if t.k != kDict {
			return m.fail("SETITEMS on a %s, not a dict", kindName(t.k))
		}
		d := t.dict()
		d.shaped = false
		m.held += entryBytes * int64(len(items)/2)
		d.keys = slices.Grow(d.keys, len(items)/2)
		d.vals = slices.Grow(d.vals, len(items)/2)
		for i := 0; i < len(items); i += 2 {
			d.keys = append(d.keys, items[i])
			d.vals = append(d.vals, items[i+1])
		}
		clear(items)
	case 0x94: // MEMOIZE
		t, err := m.top()
		if err != nil {
			return err
		}
		return m.memoPut(m.memo.len(), *t)
	case 'q', 'r', 'p': // BINPUT, LONG_BINPUT, PUT
		idx, err := m.memoIndex(op)
		if err != nil {
			return err
		}
		t, err := m.top()
		if err != nil {
			return err
		}
		return m.memoPut(int(idx), *t)
	case 'h': // BINGET, the commonest opcode of a snapshot
		if !m.in.fill(1) {
			return m.readErr(m.in.failure(), "BINGET")
		}
		b := m.in.buf[m.in.pos]
		m.in.pos++
		m.off++
		return m.pushMemo(int(b))
	case 'j', 'g': // LONG_BINGET, GET
		idx, err := m.memoIndex(op)
		if err != nil {
			return err
		}
		return m.pushMemo(int(idx))
	default:
		return m.fail("%s is not a pickle opcode this reader knows", opName(op))
	}
	return nil
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
		run = append(run, FrameID(sl&^slotMask))
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
