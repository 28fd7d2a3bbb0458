package pickle

import (
	"encoding/binary"

	"github.com/torchmem/torchmem/snapshot"
)

// This file is the entry template: every trace entry of a snapshot has the
// same keys in the same order, fetched from the same memo slots. Once the
// fast path took an entry, the fetches of its keys and each key's role are
// kept; the next entry whose key bytes are those, while the memo has seen
// no overwrite (so the slots they fetch still hold the same texts), is
// read straight into an Event by role: no dict, no per-key memo look-up,
// the action by its text's number. Its memo is left as the opcodes would
// leave it (the dict retired, the list's stack, the strings it memoizes).
// Anything else (another key, a value of another kind, a FRAME boundary,
// the end of the buffer) and it consumes nothing: the general fast path
// then reads the entry, and teaches the template its keys.

// entryTemplate is the keys of the last entry the general fast path took
// whose keys all have roles the template reads, each once.
type entryTemplate struct {
	keys  [maxFastKeys]templateKey
	n     int
	gen   uint64  // memoTable.overwrites when the keys were read
	feats feature // the features its keys tell (see eventKey)
}

// templateKey is a key of the template: the memo index it is fetched from,
// by LONG_BINGET (long) or BINGET, and its role.
type templateKey struct {
	idx  uint32
	long bool
	role keyRole
}

// templated says that the template reads a key of role r (a key whose
// value is a string, an integer or the frames).
func (r keyRole) templated() bool { return r >= roleAction && r <= roleInternalMetadata }

// featureOf is the feature a key of role r tells (eventKey sets the same).
func featureOf(r keyRole) feature {
	switch r {
	case roleTimeUS:
		return featTimeUS
	case roleCompileContext:
		return featCompileContext
	case roleUserMetadata:
		return featUserMetadata
	case roleInternalMetadata:
		return featInternalMetadata
	}
	return 0
}

// templateLearner collects, beside the general fast path, the keys of the
// entry it reads, for the template.
type templateLearner struct {
	keys  [maxFastKeys]templateKey
	n     int
	roles roleSet
	ok    bool // every key so far is fetched, templated and new
	gen   uint64
}

func (t *templateLearner) start(gen uint64) { t.n, t.roles, t.ok, t.gen = 0, 0, true, gen }

// key adds a key fetched from memo index idx by n bytes of opcode.
func (t *templateLearner) key(idx, n int, r keyRole) {
	if !t.ok || !r.templated() || t.roles.has(r) || t.n == len(t.keys) {
		t.ok = false
		return
	}
	t.keys[t.n] = templateKey{idx: uint32(idx), long: n == 5, role: r}
	t.n++
	t.roles |= 1 << r
}

// maxTemplates is how many templates are kept: the entries of a
// snapshot come in a few orders of keys (a trace entry's time_us before or
// after its frames), one template each.
const maxTemplates = 4

// entryTemplates are the templates, the one that took the last entry
// first tried (last), the next one learned replacing next.
type entryTemplates struct {
	t          [maxTemplates]entryTemplate
	last, next int
}

// teach makes the entry learned a template: the one with its keys if
// there is one (its memo generation renewed), else a new one in place of
// the oldest.
func (t *templateLearner) teach(ts *entryTemplates) {
	if !t.ok || !t.roles.has(roleAction) {
		return
	}
	i := ts.next
	for j := range ts.t {
		if tp := &ts.t[j]; tp.n == t.n && tp.keys == t.keys {
			i = j
			break
		}
	}
	if i == ts.next {
		ts.next = (ts.next + 1) % maxTemplates
	}
	tp := &ts.t[i]
	tp.keys, tp.n, tp.gen, tp.feats = t.keys, t.n, t.gen, 0
	for _, k := range t.keys[:t.n] {
		tp.feats |= featureOf(k.role)
	}
	ts.last = i
}

// entryByTemplates is entryByTemplate by the first template that reads
// the entry (the last one that read one first).
func (m *vm) entryByTemplates(buf []byte, pos, mark int) bool {
	ts := &m.fast.tmpl
	for j := range maxTemplates {
		i := (ts.last + j) % maxTemplates
		if tp := &ts.t[i]; tp.n > 0 && tp.gen == m.memo.overwrites && m.entryByTemplate(tp, buf, pos, mark) {
			ts.last = i
			return true
		}
	}
	return false
}

// entryByTemplate reads the entry at buf[pos] (just after its MARK) by
// template tp into the list below the MARK at mark, and says whether it
// did; when not, it consumed nothing. The caller checked that the
// template's memo generation is the memo's and that no value lies above
// the MARK.
func (m *vm) entryByTemplate(tp *entryTemplate, buf []byte, pos, mark int) bool {
	texts := &m.memo.texts
	e := snapshot.Event{TimeNS: snapshot.NoTime}
	var ex entryExtras
	feats := tp.feats
	memo := append(m.fast.memo[:0], value{k: kGone})
	memoText := append(m.fast.texts[:0], 0)
	listSlot := -1
	frames := m.fast.frames[:0]
	var fl fastListRead
	for i := range tp.n {
		k := &tp.keys[i]
		var ok bool
		if pos, ok = k.fetchedAt(buf, pos); !ok {
			return false
		}
		if pos >= len(buf) {
			return false
		}
		switch r := k.role; r {
		case roleAddr, roleSize, roleStream, roleDeviceFree, roleTimeUS:
			n, next, ok := smallInt(buf, pos)
			if !ok {
				return false
			}
			pos = next
			ex.set(r, n, &e)
		case roleAction:
			t, next, ok := m.textFetch(buf, pos)
			if !ok {
				return false
			}
			if e.Action = m.fast.actions.of(texts, t); e.Action == snapshot.ActionUnknown {
				return false // counted by eventKey
			}
			if e.Action == snapshot.ActionSegmentMap || e.Action == snapshot.ActionSegmentUnmap {
				feats |= featSegMap
			}
			pos = next
		case roleCompileContext, roleUserMetadata, roleInternalMetadata:
			var str string
			switch buf[pos] {
			case 'h', 'j':
				t, next, ok := m.textFetch(buf, pos)
				if !ok {
					return false
				}
				str, pos = texts.at(t), next
			case 0x8c: // SHORT_BINUNICODE, MEMOIZE: CPython writes each entry's own "N/A" afresh
				if len(buf)-pos < 2 {
					return false
				}
				n := int(buf[pos+1])
				if n > memoShortString || int64(n) > m.opts.MaxStringBytes || len(buf)-pos < 3+n || buf[pos+2+n] != 0x94 {
					return false
				}
				s, t, numbered := texts.internNumbered(buf[pos+2 : pos+2+n])
				if !numbered {
					return false
				}
				str, pos = s, pos+3+n
				memo, memoText = append(memo, strVal(kStr, s)), append(memoText, t+1)
			default:
				return false
			}
			ex.setText(r, str)
		case roleFrames:
			switch buf[pos] {
			case ']':
				listSlot, memo, memoText = len(memo), append(memo, value{k: kStack}), append(memoText, 0)
				var ok bool
				if pos, frames, ok = m.fastList(buf, pos+1, frames, &fl); !ok {
					return false
				}
			case 'h', 'j':
				idx, n := memoFetch(buf, pos)
				if n == 0 || idx >= m.memo.len() {
					return false
				}
				sl := m.memo.slot(idx)
				if sl&slotMask != slotStack {
					return false
				}
				e.Stack, pos = snapshot.StackID(sl&^slotMask), pos+n
			default:
				return false
			}
		}
	}
	if pos >= len(buf) || buf[pos] != 'u' {
		return false
	}
	pos++
	if m.memo.len()+len(memo) > m.opts.MaxMemo {
		return false // the opcodes fail at the MEMOIZE past the limit
	}
	// Commit, as the general fast path does.
	s := m.sch
	l := m.stack[mark-1].list()
	if listSlot >= 0 {
		id := m.fastStack(buf, frames, &fl)
		memo[listSlot].n, e.Stack = int64(id), id
	}
	m.storeFastMemo(memo, memoText)
	m.fast.frames, m.fast.memo, m.fast.texts = frames, memo, memoText
	in := m.in
	m.off += int64(1 + pos - in.pos) // the EMPTY_DICT and what followed
	in.pos = pos
	s.feats |= feats
	if ex.hasStream {
		// The stream of the entry before is the usual one: its ID kept
		// (Builder.Stream gives a stream the same ID every time).
		if c := &m.fast.stream; c.known && c.raw == ex.stream {
			e.Stream = c.id
		} else {
			e.Stream = s.b.Stream(ex.stream)
			c.raw, c.id, c.known = ex.stream, e.Stream, true
		}
	}
	dst := l.newEvent(m.off, s.inputBytes)
	*dst = e
	s.finishEvent(dst, ex.user, ex.internal, ex.compile, ex.deviceFree)
	m.fast.entries++
	m.fast.templated++
	return true
}

// smallInt reads an integer opcode at buf[pos] whose value fits 64 bits
// as the opcodes read it (BININT1, BININT2, BININT, LONG1 of at most 8
// bytes, or 9 with a zero top byte): the value as asInt reads it and the
// position after it.
func smallInt(buf []byte, pos int) (int64, int, bool) {
	switch buf[pos] {
	case 'K':
		if len(buf)-pos >= 2 {
			return int64(buf[pos+1]), pos + 2, true
		}
	case 'M':
		if len(buf)-pos >= 3 {
			return int64(binary.LittleEndian.Uint16(buf[pos+1:])), pos + 3, true
		}
	case 'J':
		if len(buf)-pos >= 5 {
			return int64(int32(binary.LittleEndian.Uint32(buf[pos+1:]))), pos + 5, true
		}
	case 0x8a: // LONG1
		if len(buf)-pos < 2 {
			break
		}
		n := int(buf[pos+1])
		if n >= 1 && n <= 8 && len(buf)-pos >= 2+8 {
			// decodeLong's value, from one 8-byte load: the n bytes
			// shifted to the top, then back with their sign.
			shift := uint(64 - 8*n)
			return int64(binary.LittleEndian.Uint64(buf[pos+2:])<<shift) >> shift, pos + 2 + n, true
		}
		if len(buf)-pos < 2+n || n > 9 || n == 9 && buf[pos+2+8] != 0 {
			break
		}
		if v := decodeLong(buf[pos+2 : pos+2+n]); v.k == kInt || v.k == kUint {
			return v.n, pos + 2 + n, true
		}
	}
	return 0, pos, false
}

// textFetch reads a memo fetch at buf[pos] of a short string: its text's
// number and the position after it.
func (m *vm) textFetch(buf []byte, pos int) (uint32, int, bool) {
	idx, n := memoFetch(buf, pos)
	if n == 0 || idx >= m.memo.len() {
		return 0, pos, false
	}
	sl := m.memo.slot(idx)
	if sl&slotMask != slotStr {
		return 0, pos, false
	}
	return uint32(sl &^ slotMask), pos + n, true
}

// actionCache keeps the action each text names, by the text's number,
// for the texts an entry's action was fetched as.
type actionCache struct {
	action []uint8 // action + 1 by text number, 0 when not yet found
}

// of returns the action text number i of texts names.
func (c *actionCache) of(texts *shortTexts, i uint32) snapshot.Action {
	if i >= maxCachedRoles {
		return snapshot.ParseAction(texts.at(i))
	}
	if int(i) < len(c.action) {
		if a := c.action[i]; a > 0 {
			return snapshot.Action(a - 1)
		}
	} else {
		c.action = append(c.action, make([]uint8, int(i)+1-len(c.action))...)
	}
	a := snapshot.ParseAction(texts.at(i))
	c.action[i] = uint8(a) + 1
	return a
}

// fetchedAt reports whether buf[pos:] fetches key k from its memo slot by
// the opcode the template saw (LONG_BINGET or BINGET), and the position
// after the fetch.
func (k *templateKey) fetchedAt(buf []byte, pos int) (int, bool) {
	if k.long {
		if len(buf)-pos < 5 || buf[pos] != 'j' || binary.LittleEndian.Uint32(buf[pos+1:]) != k.idx {
			return pos, false
		}
		return pos + 5, true
	}
	if len(buf)-pos < 2 || buf[pos] != 'h' || uint32(buf[pos+1]) != k.idx {
		return pos, false
	}
	return pos + 2, true
}

// entryExtras is what an entry a template reads holds beside the event's
// own fields as they stand: its stream's raw handle (the model's is an
// ID), the device's free bytes of an OOM, its metadata strings.
type entryExtras struct {
	stream                  uint64
	hasStream               bool
	deviceFree              int64
	user, internal, compile string
}

// set stores integer n of a key of role r (addr, size, stream,
// device_free, time_us) in e or ex.
func (ex *entryExtras) set(r keyRole, n int64, e *snapshot.Event) {
	switch r {
	case roleAddr:
		e.Addr = uint64(n)
	case roleSize:
		e.Size = n
	case roleStream:
		ex.stream, ex.hasStream = uint64(n), true
	case roleDeviceFree:
		ex.deviceFree = n
	default:
		e.TimeNS = n * 1000
	}
}

// setText stores the string of a key of role r (compile_context,
// user_metadata, internal_metadata).
func (ex *entryExtras) setText(r keyRole, str string) {
	switch r {
	case roleCompileContext:
		ex.compile = str
	case roleUserMetadata:
		ex.user = str
	default:
		ex.internal = str
	}
}
