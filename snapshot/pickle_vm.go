package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// This file is the opcode machine of torchmem's own pickle decoder. It
// implements the data opcodes of protocols 0–5 and refuses every opcode that
// would import or call code. Containers are reduced into the model as soon as
// they are appended to a list (see pickle_schema.go), so a multi-GB snapshot
// never exists as a generic object tree.

type kind uint8

const (
	kNone kind = iota
	kBool
	kInt   // n holds the value
	kUint  // n holds the bits of a value in [2^63, 2^64)
	kBig   // p holds *big.Int
	kFloat // n holds the float64 bits
	kStr
	kBytes
	kDict  // p holds *pdict
	kList  // p holds *plist (lists and sets)
	kTuple // p holds *plist
	kFrame // n holds a FrameID: a frame dict already interned
	kStack // n holds a StackID: a frames list already interned
	kGone  // a container already consumed into the model (tombstone in the memo)
	kMark  // stack marker used by the reference converter only
)

// value is one pickle value on the machine's stack or in its memo: 24
// bytes, since millions pass through the stack. Strings are kept as data
// pointer and length (n), containers and big integers behind p.
type value struct {
	k kind
	n int64
	p unsafe.Pointer
}

func strVal(k kind, s string) value {
	return value{k: k, n: int64(len(s)), p: unsafe.Pointer(unsafe.StringData(s))}
}

// str returns a string or bytes value's text ("" for other kinds).
func (v value) str() string {
	if (v.k == kStr || v.k == kBytes) && v.n > 0 {
		return unsafe.String((*byte)(v.p), int(v.n))
	}
	return ""
}

func (v value) dict() *pdict     { return (*pdict)(v.p) }
func (v value) list() *plist     { return (*plist)(v.p) }
func (v value) bigint() *big.Int { return (*big.Int)(v.p) }

// pdict is a Python dict in insertion order. Snapshot dicts are small, so
// lookups are linear.
type pdict struct {
	keys, vals []value
	memo       int // memo index + 1, 0 when not memoized
	gets       int // times fetched from the memo: shared when > 0, never recycled
}

func (d *pdict) get(key string) (value, bool) {
	for i, k := range d.keys {
		if k.k == kStr && k.str() == key {
			return d.vals[i], true
		}
	}
	return value{}, false
}

func (d *pdict) has(key string) bool { _, ok := d.get(key); return ok }

// plist is a Python list, set or tuple. Items that match a snapshot schema are
// kept reduced in a typed slice instead of items.
type plist struct {
	items   []value
	memo    int
	gets    int // times fetched from the memo: shared when > 0, never recycled
	frames  []FrameID
	events  []Event   // the current chunk of trace entries
	evDone  [][]Event // full chunks before it (see addEvent)
	nEvents int
	blocks  []Block
	segs    []Segment
	annots  []rawAnnotation
}

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
	sparse    map[int]value // memo entries put far beyond the end (hostile or odd)
	proto     int
	opts      Options
	path      string
	sch       *schema
	strs      map[string]string // interned short strings
	buf       []byte
	curOp     byte
	freeDicts []*pdict
	freeLists []*plist
}

func (m *vm) fail(format string, args ...any) error {
	return &Error{Path: m.path, Offset: m.opOff, Msg: fmt.Sprintf(format, args...)}
}

func (m *vm) truncated(what string) error {
	return &Error{Path: m.path, Offset: m.off, Msg: "truncated pickle: file ends inside " + what}
}

func (m *vm) readN(n int64, what string) ([]byte, error) {
	if n < 0 {
		return nil, m.fail("negative length %d in %s", n, what)
	}
	if n <= int64(cap(m.buf)) || n <= 1<<16 {
		if int64(cap(m.buf)) < n {
			m.buf = make([]byte, n)
		}
		b := m.buf[:n]
		k, err := io.ReadFull(m.in, b)
		m.off += int64(k)
		if err != nil {
			return nil, m.readErr(err, what)
		}
		return b, nil
	}
	// Large claims are read in chunks so that a short file cannot make us
	// reserve the claimed size up front.
	var out []byte
	for rem := n; rem > 0; {
		c := min(rem, 1<<20)
		start := len(out)
		out = append(out, make([]byte, c)...)
		k, err := io.ReadFull(m.in, out[start:])
		m.off += int64(k)
		if err != nil {
			return nil, m.readErr(err, what)
		}
		rem -= c
	}
	return out, nil
}

func (m *vm) readErr(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return m.truncated(what)
	}
	if errors.Is(err, errTooLarge) {
		return err
	}
	return &Error{Path: m.path, Offset: m.off, Msg: "read error: " + err.Error()}
}

func (m *vm) readLine(what string) (string, error) {
	for {
		in := m.in
		for i := in.pos; i < in.end; i++ {
			if in.buf[i] == '\n' {
				line := string(in.buf[in.pos:i])
				m.off += int64(i + 1 - in.pos)
				in.pos = i + 1
				return line, nil
			}
		}
		if in.end-in.pos >= len(in.buf) {
			return "", m.fail("%s argument longer than %d bytes", what, len(in.buf))
		}
		if !in.fill(in.end - in.pos + 1) {
			m.off += int64(in.end - in.pos)
			in.pos = in.end
			return "", m.readErr(in.failure(), what)
		}
	}
}

func (m *vm) uint(n int, what string) (uint64, error) {
	in := m.in
	if in.end-in.pos < n && !in.fill(n) {
		m.off += int64(in.end - in.pos)
		in.pos = in.end
		return 0, m.readErr(in.failure(), what)
	}
	b := in.buf[in.pos : in.pos+n]
	in.pos += n
	m.off += int64(n)
	switch n {
	case 1:
		return uint64(b[0]), nil
	case 2:
		return uint64(binary.LittleEndian.Uint16(b)), nil
	case 4:
		return uint64(binary.LittleEndian.Uint32(b)), nil
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (m *vm) str(n uint64, what string) (string, error) {
	if int64(n) > m.opts.MaxStringBytes || n > math.MaxInt64 {
		return "", m.fail("%s claims a string of %d bytes, over the limit of %d", what, n, m.opts.MaxStringBytes)
	}
	b, err := m.readN(int64(n), what)
	if err != nil {
		return "", err
	}
	if len(b) <= 64 {
		if s, ok := m.strs[string(b)]; ok {
			return s, nil
		}
		s := string(b)
		if len(m.strs) < 1<<20 {
			m.strs[s] = s
		}
		return s, nil
	}
	return string(b), nil
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

func (m *vm) memoPut(idx int, v value) {
	switch {
	case idx <= len(m.memo.slots):
		m.memo.set(idx, v)
	default:
		if m.sparse == nil {
			m.sparse = make(map[int]value)
		}
		m.sparse[idx] = v
	}
	switch v.k {
	case kDict:
		if d := v.dict(); d.memo == 0 {
			d.memo = idx + 1
		}
	case kList:
		if l := v.list(); l.memo == 0 {
			l.memo = idx + 1
		}
	}
}

func (m *vm) memoGet(idx int) (value, error) {
	var v value
	ok := false
	if idx >= 0 && idx < len(m.memo.slots) {
		v, ok = m.memo.get(idx)
	} else if m.sparse != nil {
		v, ok = m.sparse[idx]
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
	if idx < len(m.memo.slots) {
		m.memo.set(idx, v)
	} else if m.sparse != nil {
		m.sparse[idx] = v
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
		if op == '(' && len(m.marks) < m.opts.MaxDepth {
			m.off++
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
		if len(m.stack)+m.sch.generic > m.opts.MaxValues {
			return value{}, m.fail("more than %d pickle values that are not snapshot records: not a snapshot PyTorch wrote (limit snapshot.Options.MaxValues)", m.opts.MaxValues)
		}
		if len(m.memo.slots) > m.opts.MaxMemo {
			return value{}, m.fail("more than %d memo entries, more than a snapshot of this size holds (limit snapshot.Options.MaxMemo)", m.opts.MaxMemo)
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
		m.push(value{k: kDict, p: unsafe.Pointer(m.newDict())})
	case ']', 0x8f:
		m.push(value{k: kList, p: unsafe.Pointer(m.newList())})
	case ')':
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
			for i := 0; i < len(items); i += 2 {
				d.keys = append(d.keys, items[i])
				d.vals = append(d.vals, items[i+1])
			}
			m.push(value{k: kDict, p: unsafe.Pointer(d)})
		case 't':
			m.push(value{k: kTuple, p: unsafe.Pointer(&plist{items: append([]value(nil), items...)})})
		default:
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
		m.memoPut(len(m.memo.slots), *t)
	case 'q', 'r', 'p': // BINPUT, LONG_BINPUT, PUT
		idx, err := m.memoIndex(op)
		if err != nil {
			return err
		}
		t, err := m.top()
		if err != nil {
			return err
		}
		m.memoPut(int(idx), *t)
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

func bswap(v uint64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return binary.BigEndian.Uint64(b[:])
}

// decodeLong decodes a little-endian two's-complement integer.
func decodeLong(b []byte) value {
	n := len(b)
	if n == 0 {
		return value{k: kInt}
	}
	if n <= 8 {
		var u uint64
		for i := n - 1; i >= 0; i-- {
			u = u<<8 | uint64(b[i])
		}
		shift := uint(64 - 8*n)
		return value{k: kInt, n: int64(u<<shift) >> shift}
	}
	if n == 9 && b[8] == 0 {
		return value{k: kUint, n: int64(binary.LittleEndian.Uint64(b[:8]))}
	}
	// Arbitrary size: big-endian magnitude with sign.
	be := make([]byte, n)
	for i := range b {
		be[n-1-i] = b[i]
	}
	x := new(big.Int).SetBytes(be)
	if b[n-1]&0x80 != 0 {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	if x.IsInt64() {
		return value{k: kInt, n: x.Int64()}
	}
	if x.Sign() > 0 && x.IsUint64() {
		return value{k: kUint, n: int64(x.Uint64())}
	}
	return value{k: kBig, p: unsafe.Pointer(x)}
}

// textNumber handles the protocol 0 INT, LONG and FLOAT opcodes.
func (m *vm) textNumber(op byte) error {
	line, err := m.readLine(opName(op))
	if err != nil {
		return err
	}
	switch op {
	case 'F':
		f, err := strconv.ParseFloat(line, 64)
		if err != nil {
			return m.fail("FLOAT with a bad value %q", trunc(line))
		}
		m.push(value{k: kFloat, n: int64(math.Float64bits(f))})
		return nil
	case 'I':
		if line == "00" || line == "01" {
			m.push(value{k: kBool, n: int64(line[1] - '0')})
			return nil
		}
	}
	line = strings.TrimSuffix(line, "L")
	if len(line) > maxLongBytes*3 {
		return m.fail("%s integer of %d digits", opName(op), len(line))
	}
	x, ok := new(big.Int).SetString(line, 10)
	if !ok {
		return m.fail("%s with a bad value %q", opName(op), trunc(line))
	}
	switch {
	case x.IsInt64():
		m.push(value{k: kInt, n: x.Int64()})
	case x.Sign() > 0 && x.IsUint64():
		m.push(value{k: kUint, n: int64(x.Uint64())})
	default:
		m.push(value{k: kBig, p: unsafe.Pointer(x)})
	}
	return nil
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// pyQuoteToGo turns a Python repr of a byte string ('…' or "…") into a Go
// quoted string for strconv.Unquote.
func pyQuoteToGo(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		inner := strings.ReplaceAll(s[1:len(s)-1], `\'`, `'`)
		return `"` + strings.ReplaceAll(inner, `"`, `\"`) + `"`
	}
	return s
}

func kindName(k kind) string {
	switch k {
	case kNone:
		return "None"
	case kBool:
		return "bool"
	case kInt, kUint, kBig:
		return "int"
	case kFloat:
		return "float"
	case kStr:
		return "str"
	case kBytes:
		return "bytes"
	case kDict:
		return "dict"
	case kList:
		return "list"
	case kTuple:
		return "tuple"
	case kFrame:
		return "frame"
	case kStack:
		return "frame list"
	}
	return "value"
}

func float64bits(f float64) uint64 { return math.Float64bits(f) }

// newDict returns an empty dict, reusing one already reduced into the model.
func (m *vm) newDict() *pdict {
	if n := len(m.freeDicts); n > 0 {
		d := m.freeDicts[n-1]
		m.freeDicts = m.freeDicts[:n-1]
		return d
	}
	return &pdict{}
}

// recycle keeps a dict consumed into the model for reuse.
func (m *vm) recycle(d *pdict) {
	if len(m.freeDicts) < 4096 && d.gets == 0 {
		clear(d.keys)
		clear(d.vals)
		d.keys, d.vals, d.memo, d.gets = d.keys[:0], d.vals[:0], 0, 0
		m.freeDicts = append(m.freeDicts, d)
	}
}

// pushMemo pushes memo entry idx: frames, stacks and live objects directly,
// anything else through memoGet's checks.
func (m *vm) pushMemo(idx int) error {
	if idx < len(m.memo.slots) {
		sl := m.memo.slots[idx]
		switch sl & slotMask {
		case slotObj:
			v := m.memo.objs[uint32(sl&^slotMask)]
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

// newList returns an empty list, reusing a frames list already interned.
func (m *vm) newList() *plist {
	if n := len(m.freeLists); n > 0 {
		l := m.freeLists[n-1]
		m.freeLists = m.freeLists[:n-1]
		return l
	}
	return &plist{}
}

// recycleList keeps a frames list whose stack was interned for reuse.
func (m *vm) recycleList(l *plist) {
	if len(m.freeLists) < 4096 && l.gets == 0 && len(l.items)+l.nEvents+len(l.blocks)+len(l.segs)+len(l.annots) == 0 {
		l.frames, l.memo = l.frames[:0], 0
		m.freeLists = append(m.freeLists, l)
	}
}

// addEvent appends a trace entry. Entries are kept in chunks that are never
// copied while decoding (a growing slice would copy the whole trace again
// and again); allEvents joins them once at the end.
func (l *plist) addEvent(e Event) {
	if len(l.events) == cap(l.events) {
		if l.events != nil {
			l.evDone = append(l.evDone, l.events)
		}
		l.events = make([]Event, 0, min(max(256, l.nEvents), 1<<16))
	}
	l.events = append(l.events, e)
	l.nEvents++
}

// allEvents returns the trace entries of the list as one slice.
func (l *plist) allEvents() []Event {
	if len(l.evDone) == 0 {
		return l.events
	}
	out := make([]Event, 0, l.nEvents)
	for _, c := range l.evDone {
		out = append(out, c...)
	}
	out = append(out, l.events...)
	l.evDone, l.events = nil, nil
	return out
}

// memoIndex reads the memo index argument of a PUT or GET opcode: one byte
// (BINPUT), four (LONG_BINPUT, LONG_BINGET) or a decimal line (PUT, GET).
func (m *vm) memoIndex(op byte) (uint64, error) {
	switch op {
	case 'q':
		return m.uint(1, "BINPUT")
	case 'r', 'j':
		return m.uint(4, opName(op))
	}
	line, err := m.readLine(opName(op))
	if err != nil {
		return 0, err
	}
	idx, err := strconv.ParseUint(line, 10, 31)
	if err != nil {
		return 0, m.fail("%s with a bad index %q", opName(op), trunc(line))
	}
	return idx, nil
}
