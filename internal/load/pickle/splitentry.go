package pickle

import (
	"github.com/torchmem/torchmem/snapshot"
)

// This file is how the second decoder (split.go) reads an entry: what
// entryByTemplate does, into B's own state. It reads A's memo only below
// n0 and A's texts only below t0 (neither changes while B runs); a fetch
// of a later slot is a frames list's stack resolved at the merge, or the
// end of B's work. Its stacks, streams, strings and texts are numbered
// its own way, in the order it meets them, and renumbered at the merge.

// entry reads the entry whose EMPTY_DICT is buf[pos] by the template and
// returns the offset after its SETITEMS; probe: it only says whether it
// could. When it cannot read the entry it changes nothing. FRAME headers
// are passed between any two opcodes, as the opcodes would pass them (B
// reads from an opcode boundary on, or A drops its work).
func (s *split) entry(buf []byte, pos int, probe bool) (int, bool) {
	if buf[pos] != '}' {
		return 0, false
	}
	if pos = skipFrames(buf, pos+1); pos >= len(buf) || buf[pos] != 0x94 {
		return 0, false
	}
	if pos = skipFrames(buf, pos+1); pos >= len(buf) || buf[pos] != '(' {
		return 0, false
	}
	pos++
	ts := &s.tmpl
	for j := range maxTemplates {
		i := (ts.last + j) % maxTemplates
		if tp := &ts.t[i]; tp.n > 0 && tp.gen == s.gen {
			if end, ok := s.entryBy(tp, buf, pos, probe); ok {
				ts.last = i
				return end, true
			}
		}
	}
	return 0, false
}

// entryBy is entry by template tp, from just after the entry's MARK.
func (s *split) entryBy(tp *entryTemplate, buf []byte, pos int, probe bool) (int, bool) {
	e := snapshot.Event{TimeNS: snapshot.NoTime} // B's stack 0 is the empty stack, as A's
	var ex entryExtras
	feats := tp.feats
	var memo [2 + 3]uint64 // the dict, the list, a string a metadata key
	memo[0] = slotGone
	nm, listSlot := 1, -1
	var ref int64
	frames := s.frames[:0]
	var fl fastListRead
	for i := range tp.n {
		k := &tp.keys[i]
		var ok bool
		if pos, ok = k.fetchedAt(buf, skipFrames(buf, pos)); !ok {
			return 0, false
		}
		if pos = skipFrames(buf, pos); pos >= len(buf) {
			return 0, false
		}
		switch r := k.role; r {
		case roleAddr, roleSize, roleStream, roleDeviceFree, roleTimeUS:
			n, next, ok := smallInt(buf, pos)
			if !ok {
				return 0, false
			}
			pos = next
			ex.set(r, n, &e)
		case roleAction:
			t, next, ok := s.textFetch(buf, pos)
			if !ok {
				return 0, false
			}
			if e.Action = s.actions.of(&s.texts, t); e.Action == snapshot.ActionUnknown {
				return 0, false
			}
			if e.Action == snapshot.ActionSegmentMap || e.Action == snapshot.ActionSegmentUnmap {
				feats |= featSegMap
			}
			pos = next
		case roleCompileContext, roleUserMetadata, roleInternalMetadata:
			var str string
			switch buf[pos] {
			case 'h', 'j':
				t, next, ok := s.textFetch(buf, pos)
				if !ok {
					return 0, false
				}
				str, pos = s.texts.at(t), next
			case 0x8c: // SHORT_BINUNICODE, MEMOIZE
				if len(buf)-pos < 2 {
					return 0, false
				}
				n := int(buf[pos+1])
				if n > memoShortString || int64(n) > s.maxStr || len(buf)-pos < 2+n {
					return 0, false
				}
				next := skipFrames(buf, pos+2+n)
				if next >= len(buf) || buf[next] != 0x94 {
					return 0, false
				}
				if probe {
					str, pos = "", next+1
					break
				}
				str2, t, numbered := s.texts.internNumbered(buf[pos+2 : pos+2+n])
				if !numbered {
					return 0, false
				}
				str, pos = str2, next+1
				memo[nm], nm = slotStr|uint64(t), nm+1
			default:
				return 0, false
			}
			ex.setText(r, str)
		case roleFrames:
			switch buf[pos] {
			case ']':
				listSlot, nm = nm, nm+1
				var ok bool
				if pos, frames, ok = s.frameList(buf, pos+1, frames, &fl); !ok {
					return 0, false
				}
			case 'h', 'j':
				idx, n := memoFetch(buf, pos)
				if n == 0 {
					return 0, false
				}
				if idx < s.n0 {
					sl := s.slots[idx/memoChunk][idx%memoChunk]
					if sl&slotMask != slotStack || sl&^slotMask >= refGlobal {
						return 0, false
					}
					e.Stack = snapshot.StackID(refGlobal | sl&^slotMask)
				} else {
					if idx >= refMemo {
						return 0, false
					}
					// A later slot: A's or B's, told at the merge. It must
					// have been stored before this fetch.
					e.Stack = snapshot.StackID(refMemo | idx)
					ref = int64(idx) - int64(s.nmemo+nm)
				}
				pos += n
			default:
				return 0, false
			}
		}
	}
	if pos = skipFrames(buf, pos); pos >= len(buf) || buf[pos] != 'u' {
		return 0, false
	}
	end := pos + 1
	if probe {
		return end, true
	}
	// Commit. B stops short of the model's room for streams (a stream
	// interned and its entry not kept would be one too many at the merge).
	if ex.hasStream && len(s.own.Snap.Streams) >= 1<<16-2 {
		return 0, false
	}
	if listSlot >= 0 {
		id, ok := s.stack(buf, frames, &fl)
		if !ok {
			return 0, false
		}
		memo[listSlot], e.Stack = slotStack|uint64(id), snapshot.StackID(id)
	}
	if ex.hasStream {
		e.Stream = s.own.Stream(ex.stream)
	}
	if e.Action == snapshot.ActionOOM {
		e.Addr = uint64(ex.deviceFree)
	}
	s.charged += int64(len(ex.user) + len(ex.internal) + len(ex.compile))
	s.slack = min(s.slack, expansionPerByte*int64(end)-s.charged)
	switch {
	case ex.user != "":
		e.Meta = s.own.String(ex.user)
	case ex.internal != "":
		e.Meta = s.own.String(ex.internal)
	case ex.compile != "" && ex.compile != "N/A":
		e.Meta = s.own.String(ex.compile)
	}
	s.feats |= feats
	if e.Stack&refMemo != 0 {
		s.maxRef = max(s.maxRef, ref)
		s.refs = append(s.refs, uint32(s.n))
	}
	s.events[s.n] = e
	s.n++
	for _, sl := range memo[:nm] {
		if s.nmemo%memoChunk == 0 {
			s.memo = append(s.memo, make([]uint64, memoChunk))
		}
		s.memo[s.nmemo/memoChunk][s.nmemo%memoChunk] = sl
		s.nmemo++
	}
	s.frames = frames
	return end, true
}

// textFetch is vm.textFetch on A's memo below n0.
func (s *split) textFetch(buf []byte, pos int) (uint32, int, bool) {
	idx, n := memoFetch(buf, pos)
	if n == 0 || idx >= s.n0 {
		return 0, pos, false
	}
	sl := s.slots[idx/memoChunk][idx%memoChunk]
	if sl&slotMask != slotStr {
		return 0, pos, false
	}
	return uint32(sl &^ slotMask), pos + n, true
}

// frameList is vm.fastList on A's memo below n0, with B's last list.
func (s *split) frameList(buf []byte, pos int, frames []snapshot.FrameID, fl *fastListRead) (int, []snapshot.FrameID, bool) {
	*fl = fastListRead{}
	if pos = skipFrames(buf, pos); pos >= len(buf) || buf[pos] != 0x94 {
		return pos, frames, false
	}
	if pos = skipFrames(buf, pos+1); pos >= len(buf) {
		return pos, frames, false
	}
	frame := func(pos int) (snapshot.FrameID, int) {
		idx, n := memoFetch(buf, pos)
		if n == 0 || idx >= s.n0 {
			return 0, 0
		}
		if sl := s.slots[idx/memoChunk][idx%memoChunk]; sl&slotMask == slotFrame {
			return snapshot.FrameID(sl &^ slotMask), n
		}
		return 0, 0
	}
	switch c := &s.lastList; {
	case buf[pos] == '(' && len(c.bytes) > 0 && len(buf)-pos >= len(c.bytes) && string(buf[pos:pos+len(c.bytes)]) == string(c.bytes):
		pos += len(c.bytes)
		fl.last = true
	case buf[pos] == '(':
		fl.from = pos
		for pos = skipFrames(buf, pos+1); pos < len(buf) && buf[pos] != 'e'; pos = skipFrames(buf, pos) {
			f, n := frame(pos)
			if n == 0 {
				return pos, frames, false
			}
			frames, pos = append(frames, f), pos+n
		}
		if pos >= len(buf) {
			return pos, frames, false
		}
		pos++
		fl.to = pos
	case buf[pos] == 'h' || buf[pos] == 'j':
		if f, n := frame(pos); n > 0 {
			if next := skipFrames(buf, pos+n); next >= len(buf) || buf[next] != 'a' {
				return pos, frames, false
			}
			frames, pos = append(frames, f), skipFrames(buf, pos+n)+1
		}
	}
	return pos, frames, true
}

// stack is B's number of the stack of the frames list frameList read (0:
// the empty stack).
func (s *split) stack(buf []byte, frames []snapshot.FrameID, fl *fastListRead) (uint32, bool) {
	if fl.last {
		return s.lastList.stack, true
	}
	if len(s.own.Snap.Stacks) >= 1<<20 {
		return 0, false
	}
	id := uint32(s.own.Stack(frames))
	if fl.to > fl.from {
		s.lastList.bytes, s.lastList.stack = append(s.lastList.bytes[:0], buf[fl.from:fl.to]...), id
	}
	return id, true
}
