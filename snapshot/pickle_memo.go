package snapshot

// memoTable is the pickle memo in 8 bytes a slot. Python memoizes every
// dict, list and string, so a long trace memoizes millions of objects that
// are never referenced again once reduced into the model. Reduced slots keep
// only their compact form (a frame or stack ID, or a tombstone); live
// objects sit in a side table whose entries are reused once their object is
// reduced, so the memo's memory follows the live objects, not the file.
type memoTable struct {
	chunks [][]uint64 // slots, memoChunk a chunk: growing never copies them
	n      int        // slots in use
	objs   []value    // live objects referenced by slots
	free   []uint32   // reusable indexes of objs
	// strs are the short strings slots hold, each text once: CPython
	// writes a string object per trace entry afresh (compile_context's
	// "N/A"), a slot each, which the side table would keep forever.
	strs   []string
	strIdx map[string]uint32
}

// memoShortString is the longest string a slot holds by its text's index.
const memoShortString = 64

// memoChunk is the number of slots in a chunk (32 KiB).
const memoChunk = 1 << 12

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
	slotStr   uint64 = 8 << 56 // a short string: its index in strs
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
			i, ok := t.strIdx[str]
			if !ok {
				if t.strIdx == nil {
					t.strIdx = map[string]uint32{}
				}
				i = uint32(len(t.strs))
				t.strs = append(t.strs, str)
				t.strIdx[str] = i
			}
			return slotStr | uint64(i)
		}
	}
	var i uint32
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
		t.objs[i] = v
	} else {
		i = uint32(len(t.objs))
		t.objs = append(t.objs, v)
	}
	return slotObj | uint64(i)
}

// release frees the side-table entry of a slot being overwritten.
func (t *memoTable) release(slot uint64) {
	if slot&slotMask == slotObj {
		i := uint32(slot &^ slotMask)
		t.objs[i] = value{}
		t.free = append(t.free, i)
	}
}

// set stores v at idx (idx ≤ len: the memo is dense; the caller handles sparse).
func (t *memoTable) set(idx int, v value) {
	if idx == t.n {
		if t.n%memoChunk == 0 {
			t.chunks = append(t.chunks, make([]uint64, memoChunk))
		}
		t.chunks[idx/memoChunk][idx%memoChunk] = t.encode(v)
		t.n++
		return
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
		return t.objs[uint32(s&^slotMask)], true
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
		return strVal(kStr, t.strs[uint32(s&^slotMask)]), true
	}
	return value{}, false
}
