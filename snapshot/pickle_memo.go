package snapshot

// memoTable is the pickle memo in 8 bytes a slot. Python memoizes every
// dict, list and string, so a long trace memoizes millions of objects that
// are never referenced again once reduced into the model. Reduced slots keep
// only their compact form (a frame or stack ID, or a tombstone); live
// objects sit in a side table whose entries are reused once their object is
// reduced, so the memo's memory follows the live objects, not the file.
//
// Both tables grow in chunks, never copied: a slot costs 8 bytes and a
// live object 24 more, so memoBytesPerEntry bounds what each entry of the
// memo (Options.MaxMemo) can cost. An index past the end fills the slots
// before it with empty ones: an index is an entry, whether or not the
// pickle stores the ones before it.
type memoTable struct {
	chunks [][]uint64 // slots, memoChunk a chunk
	n      int        // slots in use
	objs   [][]value  // live objects referenced by slots, memoChunk a chunk
	nobjs  int        // side-table entries in use or free
	free   []uint32   // reusable indexes of objs
}

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
	for t.n <= idx {
		if t.n%memoChunk == 0 {
			t.chunks = append(t.chunks, make([]uint64, memoChunk))
		}
		n := min(idx+1, (t.n/memoChunk+1)*memoChunk)
		t.n = n // the new chunk's slots are empty already
	}
	c := &t.chunks[idx/memoChunk][idx%memoChunk]
	t.release(*c)
	*c = t.encode(v)
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
	}
	return value{}, false
}
