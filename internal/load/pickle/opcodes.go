package pickle

import (
	"slices"
	"strconv"
	"unsafe"

	"github.com/torchmem/torchmem/snapshot"
)

// step runs one opcode, reading its arguments from the input: the pickle
// machine's instruction set, as far as snapshots use it (refused lists the
// opcodes that would run code; run calls step for every other one).
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
			return m.fail("%s integer of %d bytes (at most %d supported; snapshot integers fit in 9)", OpName(op), n, maxLongBytes)
		}
		b, err := m.readN(int64(n), OpName(op))
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
		n, err := m.uint(w, OpName(op))
		if err != nil {
			return err
		}
		s, err := m.str(n, OpName(op))
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
		n, err := m.uint(w, OpName(op))
		if err != nil {
			return err
		}
		s, err := m.str(n, OpName(op))
		if err != nil {
			return err
		}
		if op == 'U' || op == 'T' {
			m.push(strVal(kStr, s))
		} else {
			m.push(strVal(kBytes, s))
		}
	case 'V', 'S': // protocol 0 text strings
		line, err := m.readLine(OpName(op))
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
			return m.fail("%s needs %d values on the stack", OpName(op), n)
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
			return m.fail("%s to a %s, not a list", OpName(op), kindName(t.k))
		}
		l := t.list()
		if len(items) > 0 && items[0].k == kFrame && len(l.items) == 0 {
			l.frames = slices.Grow(l.frames, len(items)) // one allocation for the batch
		}
		for i, it := range items {
			if it.k == kFrame && len(l.items) == 0 {
				l.frames = append(l.frames, snapshot.FrameID(it.n))
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
		return m.fail("%s is not a pickle opcode this reader knows", OpName(op))
	}
	return nil
}
