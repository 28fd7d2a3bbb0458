package pickle

import (
	"encoding/binary"

	"github.com/torchmem/torchmem/snapshot"
)

// This file is the fast path of a trace entry, most of every snapshot
// after its frames: a dict of memo-fetched keys and scalar values and a
// frames list of memo-fetched frames, reduced into an Event as soon as its
// SETITEMS is read instead of opcode by opcode. Anything else (an inline
// string, a FRAME boundary, a value it does not know, a dict that is not a
// trace entry, an entry that does not lie whole in the read buffer) and it
// consumes nothing: the opcodes then run one by one, so the model is the
// same either way.

// maxFastKeys bounds the keys of an entry the fast path takes (PyTorch
// writes at most 10); fastWindow is how many bytes it makes sure the read
// buffer holds from the entry on (an entry of 16 KiB has 3,000 frames).
const (
	maxFastKeys = 16
	fastWindow  = 16 << 10
)

// entryFast is called after an EMPTY_DICT. When the dict is a trace entry
// appended to the list below the current MARK, it reduces the entry into
// that list and returns true.
func (m *vm) entryFast() bool {
	if len(m.marks) == 0 {
		return false
	}
	mark := m.marks[len(m.marks)-1]
	if mark == 0 || m.stack[mark-1].k != kList {
		return false
	}
	if s := m.split; s != nil && m.off >= s.x.Load() && m.splitJoin() {
		return true
	}
	in := m.in
	if in.end-in.pos < fastWindow {
		in.fill(fastWindow) // whole entries in the buffer (at the input's end, what is left)
	}
	buf, pos := in.buf[:in.end], in.pos
	skip := func(pos int) int { return skipFrames(buf, pos) }
	// EMPTY_DICT was read; MEMOIZE, MARK follow.
	if pos = skip(pos); pos >= len(buf) || buf[pos] != 0x94 {
		return false
	}
	if pos = skip(pos + 1); pos >= len(buf) || buf[pos] != '(' {
		return false
	}
	pos++
	if !m.fast.noTemplate && len(m.stack) == mark && m.entryByTemplates(buf, pos, mark) {
		if m.fast.templated == m.splitAt {
			m.splitStart(mark)
		}
		return true
	}
	learn := &m.fast.learn
	learn.start(m.memo.overwrites)
	d := &m.fast.dict
	d.keys, d.vals = d.keys[:0], d.vals[:0]
	keyRoles := m.fast.keyRoles[:0] // beside d.keys, each key's role
	var roles roleSet
	if m.fast.frames == nil {
		// Most stacks fit: an entry the fast path leaves to the opcodes
		// then costs no new scratch (its grown one is kept only on success).
		m.fast.frames = make([]snapshot.FrameID, 0, 256)
	}
	frames := m.fast.frames[:0]
	list := -1 // the index in d.vals of the frames list written here
	// memo: what the entry's MEMOIZEs store, in order (the dict's first);
	// texts: beside it, a short string's text number + 1 (0: not one);
	// listSlot: the frames list's among them. Both hold at most the dict,
	// the list and a string a key: made once at that size, they are never
	// made again, whether or not an entry is taken.
	if m.fast.memo == nil {
		m.fast.memo, m.fast.texts = make([]value, 0, maxFastKeys+2), make([]uint32, 0, maxFastKeys+2)
	}
	memo := append(m.fast.memo[:0], value{k: kGone})
	texts := append(m.fast.texts[:0], 0)
	listSlot := -1
	var fl fastListRead
	// get reads a memo fetch at pos: its value, and the position after it.
	get := func(pos int) (value, int, bool) {
		idx, n := memoFetch(buf, pos)
		if n == 0 {
			return value{}, pos, false
		}
		v, ok := m.memo.get(idx)
		return v, pos + n, ok
	}
	for {
		if pos = skip(pos); pos >= len(buf) {
			return false
		}
		if buf[pos] == 'u' {
			pos++
			break
		}
		if len(d.keys) == maxFastKeys {
			return false
		}
		// The key: its role by its text's number, its string only for a
		// role that is no trace entry's field (eventKey names it).
		var k value
		var r keyRole
		idx, n := memoFetch(buf, pos)
		if n == 0 || idx >= m.memo.len() {
			return false
		}
		next := pos + n
		if sl := m.memo.slot(idx); sl&slotMask == slotStr {
			r = m.fast.roles.of(&m.memo.texts, uint32(sl&^slotMask))
			if !r.entryField() {
				k = strVal(kStr, m.memo.texts.at(uint32(sl&^slotMask)))
			}
		} else {
			var ok bool
			if k, ok = m.memo.get(idx); !ok || k.k != kStr {
				return false
			}
			r = roleOf(k.str())
		}
		learn.key(idx, n, r)
		roles |= 1 << r
		if pos = skip(next); pos >= len(buf) {
			return false
		}
		var v value
		switch op := buf[pos]; op {
		case 'h', 'j':
			var ok bool
			if v, pos, ok = get(pos); !ok {
				return false
			}
			switch v.k {
			case kStr, kStack, kInt, kNone, kBool:
			default:
				return false
			}
		case 'K':
			if len(buf)-pos < 2 {
				return false
			}
			v, pos = value{k: kInt, n: int64(buf[pos+1])}, pos+2
		case 'M':
			if len(buf)-pos < 3 {
				return false
			}
			v, pos = value{k: kInt, n: int64(binary.LittleEndian.Uint16(buf[pos+1:]))}, pos+3
		case 'J':
			if len(buf)-pos < 5 {
				return false
			}
			v, pos = value{k: kInt, n: int64(int32(binary.LittleEndian.Uint32(buf[pos+1:])))}, pos+5
		case 0x8a: // LONG1
			if len(buf)-pos < 2 {
				return false
			}
			n := int(buf[pos+1])
			if n > 9 || len(buf)-pos < 2+n {
				return false
			}
			v, pos = decodeLong(buf[pos+2:pos+2+n]), pos+2+n
		case 'N':
			v, pos = value{k: kNone}, pos+1
		case 0x88, 0x89: // NEWTRUE, NEWFALSE
			v, pos = value{k: kBool, n: int64(0x89 - op)}, pos+1
		case 0x8c: // SHORT_BINUNICODE: CPython writes each entry's own "N/A" afresh
			if len(buf)-pos < 2 {
				return false
			}
			n := int(buf[pos+1])
			if n > memoShortString || int64(n) > m.opts.MaxStringBytes || len(buf)-pos < 2+n {
				return false
			}
			str, ti, numbered := m.memo.texts.internNumbered(buf[pos+2 : pos+2+n])
			v, pos = strVal(kStr, str), pos+2+n
			if next := skip(pos); next < len(buf) && buf[next] == 0x94 {
				memo, pos = append(memo, v), next+1
				if numbered {
					texts = append(texts, ti+1)
				} else {
					texts = append(texts, 0)
				}
			}
		case ']': // a frames list: MEMOIZE, then nothing, one frame and APPEND, or MARK, frames, APPENDS
			if list >= 0 || r != roleFrames {
				return false
			}
			listSlot, memo, texts = len(memo), append(memo, value{k: kStack}), append(texts, 0)
			list = len(d.vals)
			var ok bool
			if pos, frames, ok = m.fastList(buf, pos+1, frames, &fl); !ok {
				return false
			}
			v = value{k: kStack}
		default:
			return false
		}
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, v)
		keyRoles = append(keyRoles, r)
	}
	if shapeOfRoles(roles) != shapeEntry {
		return false
	}
	if m.memo.len()+len(memo) > m.opts.MaxMemo {
		return false // the opcodes fail at the MEMOIZE past the limit
	}
	s := m.sch
	l := m.stack[mark-1].list()
	noItems := len(m.stack) == mark
	if !noItems {
		// The records of this batch the fast path did not take (an entry
		// with a new frame): reduced now, in order, as APPENDS would, so
		// that this entry keeps its place after them.
		items := m.stack[mark:]
		for _, it := range items {
			if it.k == kFrame && len(l.items) == 0 {
				l.frames = append(l.frames, snapshot.FrameID(it.n))
				continue
			}
			s.appendItem(l, it)
		}
		clear(items)
		m.stack = m.stack[:mark]
		if s.err != nil {
			return true // the machine stops on it
		}
	}
	// Commit: the dict's memo slot is retired as a reduced entry's, the
	// list's holds its stack, as the opcodes would have left them.
	if list >= 0 {
		id := m.fastStack(buf, frames, &fl)
		memo[listSlot].n, d.vals[list].n = int64(id), int64(id)
	}
	m.storeFastMemo(memo, texts)
	m.fast.frames, m.fast.memo, m.fast.texts, m.fast.keyRoles = frames, memo, texts, keyRoles
	m.off += int64(1 + pos - in.pos) // the EMPTY_DICT and what followed
	in.pos = pos
	a := newEntryFields()
	for i, r := range keyRoles {
		s.eventKey(&a, r, d.keys[i], d.vals[i])
	}
	l.addEvent(s.eventDone(&a), m.off, s.inputBytes)
	m.fast.entries++
	if noItems {
		learn.teach(&m.fast.tmpl)
	}
	return true
}

// memoFetch decodes a memo fetch (BINGET or LONG_BINGET) at buf[pos]: the
// memo index and the bytes the opcode takes, 0 when it is none.
func memoFetch(buf []byte, pos int) (idx, n int) {
	switch {
	case buf[pos] == 'h' && len(buf)-pos >= 2:
		return int(buf[pos+1]), 2
	case buf[pos] == 'j' && len(buf)-pos >= 5:
		return int(binary.LittleEndian.Uint32(buf[pos+1:])), 5
	}
	return 0, 0
}

// frameAt reads a memo fetch of a frame already reduced at buf[pos]: the
// frame and the bytes the fetch takes (0 when it is none).
func (m *vm) frameAt(buf []byte, pos int) (snapshot.FrameID, int) {
	idx, n := memoFetch(buf, pos)
	if n == 0 || idx >= m.memo.len() {
		return 0, 0
	}
	if sl := m.memo.slot(idx); sl&slotMask == slotFrame {
		return snapshot.FrameID(sl &^ slotMask), n
	}
	return 0, 0
}

// skipFrames passes the FRAME opcodes at pos (CPython's framer cuts its
// 64 KiB frames between any two opcodes; the machine ignores them).
func skipFrames(buf []byte, pos int) int {
	for len(buf)-pos >= 9 && buf[pos] == 0x95 {
		pos += 9
	}
	return pos
}

// fastListRead is how the fast path read an entry's frames list: written
// out (MARK to APPENDS), it is buf[from:to], read while the memo had seen
// gen overwrites; last: it is the last taken entry's (vm.fast.lastList).
type fastListRead struct {
	from, to int
	gen      uint64
	last     bool
}

// fastList reads a frames list at buf[pos], just after its EMPTY_LIST:
// MEMOIZE, then nothing, one frame and APPEND, or MARK, frames, APPENDS.
// It appends the frames to frames (none when the list is the last taken
// entry's, fl.last) and returns the position after the list; false when
// the list is not one of those.
func (m *vm) fastList(buf []byte, pos int, frames []snapshot.FrameID, fl *fastListRead) (int, []snapshot.FrameID, bool) {
	*fl = fastListRead{}
	if pos = skipFrames(buf, pos); pos >= len(buf) || buf[pos] != 0x94 {
		return pos, frames, false
	}
	if pos = skipFrames(buf, pos+1); pos >= len(buf) {
		return pos, frames, false
	}
	switch c := &m.fast.lastList; {
	case buf[pos] == '(' && len(c.bytes) > 0 && c.gen == m.memo.overwrites && len(buf)-pos >= len(c.bytes) &&
		string(buf[pos:pos+len(c.bytes)]) == string(c.bytes):
		// The bytes of the list the last entry took, the memo's
		// slots unchanged since: the same frames, the same stack.
		// (Consecutive entries share a stack a third to nine
		// tenths of the time in PyTorch's snapshots: a free's
		// request and completion, a loop's allocations.)
		pos += len(c.bytes)
		fl.last = true
	case buf[pos] == '(':
		// frameAt, written out: a stack has dozens of frames.
		fl.from, fl.gen = pos, m.memo.overwrites
		slots, nSlots := m.memo.chunks, uint(m.memo.len())
		for pos = skipFrames(buf, pos+1); pos < len(buf) && buf[pos] != 'e'; pos = skipFrames(buf, pos) {
			var idx uint
			switch {
			case buf[pos] == 'h' && len(buf)-pos >= 2:
				idx, pos = uint(buf[pos+1]), pos+2
			case buf[pos] == 'j' && len(buf)-pos >= 5:
				idx, pos = uint(binary.LittleEndian.Uint32(buf[pos+1:])), pos+5
			default:
				return pos, frames, false
			}
			if idx >= nSlots {
				return pos, frames, false
			}
			sl := slots[idx/memoChunk][idx%memoChunk]
			if sl&slotMask != slotFrame {
				return pos, frames, false
			}
			frames = append(frames, snapshot.FrameID(sl&^slotMask))
		}
		if pos >= len(buf) {
			return pos, frames, false
		}
		pos++
		fl.to = pos
	case buf[pos] == 'h' || buf[pos] == 'j':
		// One frame and APPEND, or the next key (an empty list).
		if f, n := m.frameAt(buf, pos); n > 0 {
			next := skipFrames(buf, pos+n)
			if next >= len(buf) || buf[next] != 'a' {
				return pos, frames, false
			}
			frames = append(frames, f)
			pos = next + 1
		}
	}
	return pos, frames, true
}

// fastStack is the stack of the frames list fastList read (fl), at its
// entry's commit; a list written out becomes the last list.
func (m *vm) fastStack(buf []byte, frames []snapshot.FrameID, fl *fastListRead) snapshot.StackID {
	c := &m.fast.lastList
	switch {
	case fl.last:
		m.fast.listHits++
		return c.stack
	case fl.to > fl.from:
		id := m.sch.b.Stack(frames)
		c.bytes, c.stack, c.gen = append(c.bytes[:0], buf[fl.from:fl.to]...), id, fl.gen
		return id
	}
	return m.sch.b.Stack(frames)
}

// storeFastMemo stores what a taken entry's MEMOIZEs store, in order:
// memo holds the values (the dict retired, the list's stack), texts
// beside it a short string's text number + 1. A string, the retired dict
// and the stack: nothing for memoPut to do but store their slots (the
// caller checked MaxMemo).
func (m *vm) storeFastMemo(memo []value, texts []uint32) {
	for i, v := range memo {
		switch t := texts[i]; {
		case t > 0:
			m.memo.push(slotStr | uint64(t-1))
		case v.k == kGone:
			m.memo.push(slotGone)
		case v.k == kStack:
			m.memo.push(slotStack | uint64(v.n))
		default:
			_ = m.memoPut(m.memo.len(), v)
		}
	}
}
