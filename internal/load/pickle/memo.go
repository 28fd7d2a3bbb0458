package pickle

// memoTable is the pickle memo in 8 bytes a slot. Python memoizes every
// dict, list and string, so a long trace memoizes millions of objects that
// are never referenced again once reduced into the model. Reduced slots keep
// only their compact form (a frame or stack ID, or a tombstone); a short
// string, its text's index in texts; live objects sit in a side table
// whose entries are reused once their object is reduced, so the memo's
// memory follows the live objects, not the file.
//
// Both tables grow in chunks, never copied: a slot costs 8 bytes and a
// live object 24 more, so memoBytesPerEntry bounds what each entry of the
// memo (Options.MaxMemo) can cost. An index past the end fills the slots
// before it with empty ones: an index is an entry, whether or not the
// pickle stores the ones before it. The texts are the decoder's, bounded
// on their own (maxShortTexts), and cost a slot nothing more.
type memoTable struct {
	chunks [][]uint64 // slots, memoChunk a chunk
	n      int        // slots in use
	objs   [][]value  // live objects referenced by slots, memoChunk a chunk
	nobjs  int        // side-table entries in use or free
	// overwrites counts stores at an index already stored (or filled
	// empty): while it is unchanged, every slot read earlier holds what it
	// held then.
	overwrites uint64
	// split is the second decoder reading the slots while it runs: an
	// overwrite stops it first, and drops its work.
	split *split
	free  []uint32 // reusable indexes of objs
	// texts are the short strings of the pickle, each text once: CPython
	// writes a string object per trace entry afresh (compile_context's
	// "N/A"), a slot each, which the side table would keep forever.
	texts shortTexts
}

// shortTexts interns the short strings (memoShortString bytes at most) a
// pickle holds: one string for each text, numbered, while there are fewer
// than maxShortTexts; a text past them is a string of its own. The texts
// grow in chunks like the memo's slots.
type shortTexts struct {
	idx  map[string]uint32
	text [][]string // memoChunk a chunk
	n    int
	// last is the text found or added last, and its number: CPython writes
	// the same text afresh entry after entry (compile_context's "N/A"),
	// which a comparison of a few bytes finds without hashing.
	last    string
	lastNum uint32
	hasLast bool
}

// MaxShortTexts is the most texts interned, each at most shortTextBytes
// beside its own bytes.
const MaxShortTexts = 1 << 20

// ShortTextBytes is the most an interned text costs beside its bytes: its
// string in text and its map entry, the map's growth included.
const ShortTextBytes = 160

// at is text i.
func (t *shortTexts) at(i uint32) string { return t.text[i/memoChunk][i%memoChunk] }

// intern returns the text of b (at most memoShortString bytes), the same
// string for the same text while texts has room.
func (t *shortTexts) intern(b []byte) string {
	s, _, _ := t.internNumbered(b)
	return s
}

// internNumbered is intern that also returns the text's number, and false
// for one past the texts' room (a string of its own, without a number).
func (t *shortTexts) internNumbered(b []byte) (string, uint32, bool) {
	if t.hasLast && string(b) == t.last {
		return t.last, t.lastNum, true
	}
	if i, ok := t.idx[string(b)]; ok {
		s := t.at(i)
		t.last, t.lastNum, t.hasLast = s, i, true
		return s, i, true
	}
	s := string(b)
	i, ok := t.add(s)
	return s, i, ok
}

// index is the number of the text of s, interned now if there is room.
func (t *shortTexts) index(s string) (uint32, bool) {
	if t.hasLast && s == t.last {
		return t.lastNum, true
	}
	if i, ok := t.idx[s]; ok {
		t.last, t.lastNum, t.hasLast = t.at(i), i, true
		return i, true
	}
	return t.add(s)
}

func (t *shortTexts) add(s string) (uint32, bool) {
	if t.n >= MaxShortTexts {
		return 0, false
	}
	if t.idx == nil {
		t.idx = make(map[string]uint32, 1024)
	}
	if t.n%memoChunk == 0 {
		t.text = append(t.text, make([]string, memoChunk))
	}
	i := uint32(t.n)
	t.text[i/memoChunk][i%memoChunk] = s
	t.idx[s] = i
	t.n++
	return i, true
}

// memoShortString is the longest string a slot holds by its text's index.
const memoShortString = 64

// memoChunk is the number of slots in a chunk (32 KiB), and of objects in
// a chunk of the side table (96 KiB).
const memoChunk = 1 << 12

// memoBytesPerEntry is the most one memo entry costs: its slot and a side
// table entry (Options.MaxMemo entries cost at most this many bytes each).
const memoBytesPerEntry = 8 + 24

// obj is side-table entry i.
func (t *memoTable) obj(i uint32) value { return t.objs[i/memoChunk][i%memoChunk] }

// len is the number of slots.
func (t *memoTable) len() int { return t.n }

// slot returns slot idx (idx < len).
func (t *memoTable) slot(idx int) uint64 { return t.chunks[idx/memoChunk][idx%memoChunk] }

const (
	slotEmpty uint64 = 0
	slotObj   uint64 = 1 << 56
	slotFrame uint64 = 2 << 56
	slotStack uint64 = 3 << 56
	slotGone  uint64 = 4 << 56
	slotNone  uint64 = 5 << 56
	slotInt   uint64 = 6 << 56 // an int in 56-bit two's complement
	slotBool  uint64 = 7 << 56
	slotStr   uint64 = 8 << 56 // a short string: its index in texts
	slotMask  uint64 = 0xff << 56
	payload   uint64 = 1<<56 - 1
)

func (t *memoTable) encode(v value) uint64 {
	switch v.k {
	case kFrame:
		return slotFrame | uint64(v.n)
	case kStack:
		return slotStack | uint64(v.n)
	case kGone:
		return slotGone
	case kNone:
		return slotNone
	case kBool:
		return slotBool | uint64(v.n&1)
	case kInt:
		if v.n >= -1<<55 && v.n < 1<<55 {
			return slotInt | uint64(v.n)&payload
		}
	case kStr:
		if str := v.str(); len(str) <= memoShortString {
			if i, ok := t.texts.index(str); ok {
				return slotStr | uint64(i)
			}
		}
	}
	var i uint32
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		if t.nobjs%memoChunk == 0 {
			t.objs = append(t.objs, make([]value, memoChunk))
		}
		i = uint32(t.nobjs)
		t.nobjs++
	}
	t.objs[i/memoChunk][i%memoChunk] = v
	return slotObj | uint64(i)
}

// release frees the side-table entry of a slot being overwritten.
func (t *memoTable) release(slot uint64) {
	if slot&slotMask == slotObj {
		i := uint32(slot &^ slotMask)
		t.objs[i/memoChunk][i%memoChunk] = value{}
		t.free = append(t.free, i)
	}
}

// set stores v at idx; an index past the end first fills the slots up to
// it with empty ones (the caller bounds idx).
func (t *memoTable) set(idx int, v value) {
	c := t.replace(idx)
	*c = t.encode(v)
}

// push stores slot at the next index (a slot past the end is empty: there
// is no side-table entry to free, no overwrite to count).
func (t *memoTable) push(slot uint64) {
	if t.n%memoChunk == 0 {
		t.chunks = append(t.chunks, make([]uint64, memoChunk))
	}
	t.chunks[t.n/memoChunk][t.n%memoChunk] = slot
	t.n++
}

// extend adds n empty slots, their chunks made, and returns the first's
// index: their values are stored after (by another goroutine, while the
// memo is otherwise left alone).
func (t *memoTable) extend(n int) int {
	first, end := t.n, t.n+n
	for t.n < end {
		if t.n%memoChunk == 0 {
			t.chunks = append(t.chunks, make([]uint64, memoChunk))
		}
		t.n = min(end, (t.n/memoChunk+1)*memoChunk)
	}
	return first
}

// replace returns slot idx, its side-table entry freed, for set (and the
// fast path) to overwrite (first filling the slots up to it).
func (t *memoTable) replace(idx int) *uint64 {
	if idx < t.n {
		t.overwrites++
		if t.split != nil {
			t.split.abort()
		}
	}
	for t.n <= idx {
		if t.n%memoChunk == 0 {
			t.chunks = append(t.chunks, make([]uint64, memoChunk))
		}
		n := min(idx+1, (t.n/memoChunk+1)*memoChunk)
		t.n = n // the new chunk's slots are empty already
	}
	c := &t.chunks[idx/memoChunk][idx%memoChunk]
	t.release(*c)
	return c
}

// get returns the value at idx and whether it was ever stored.
func (t *memoTable) get(idx int) (value, bool) {
	if idx < 0 || idx >= t.n {
		return value{}, false
	}
	s := t.slot(idx)
	switch s & slotMask {
	case slotObj:
		return t.obj(uint32(s &^ slotMask)), true
	case slotFrame:
		return value{k: kFrame, n: int64(s &^ slotMask)}, true
	case slotStack:
		return value{k: kStack, n: int64(s &^ slotMask)}, true
	case slotGone:
		return value{k: kGone}, true
	case slotNone:
		return value{k: kNone}, true
	case slotBool:
		return value{k: kBool, n: int64(s & 1)}, true
	case slotInt:
		return value{k: kInt, n: int64(s<<8) >> 8}, true
	case slotStr:
		return strVal(kStr, t.texts.at(uint32(s&^slotMask))), true
	}
	return value{}, false
}
