package pickle

import (
	"encoding/binary"
	"math/big"
	"slices"
	"unsafe"

	"github.com/torchmem/torchmem/snapshot"
)

// This file holds the values of torchmem's pickle machine: scalars,
// strings and the dict and list containers, which keep snapshot records
// reduced into typed slices.

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

func (v value) dict() *pdict { return (*pdict)(v.p) }

func (v value) list() *plist { return (*plist)(v.p) }

func (v value) bigint() *big.Int { return (*big.Int)(v.p) }

// pdict is a Python dict in insertion order. Snapshot dicts are small, so
// lookups are linear.
type pdict struct {
	keys, vals []value
	memo       int // memo index + 1, 0 when not memoized
	gets       int // times fetched from the memo: shared when > 0, never recycled
	// What its first reduction found, for the references to it fetched
	// before then (a batch of memo fetches of one dict): its shape while
	// no key is added, the frame it became, or that a record took it.
	shape   dictShape
	shaped  bool
	frame   snapshot.FrameID // the frame's ID + 1, 0 when not a reduced frame
	reduced bool             // a trace entry, block, segment or annotation took it
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
	gets    int              // times fetched from the memo or DUP: shared when > 0
	stack   snapshot.StackID // the stack its frames became + 1, 0 before (see schema.stack)
	frames  []snapshot.FrameID
	events  []snapshot.Event   // the current chunk of trace entries
	evDone  [][]snapshot.Event // full chunks before it (see addEvent)
	nEvents int
	blocks  []snapshot.Block
	segs    []snapshot.Segment
	annots  []rawAnnotation
	// entryRefs counts the references to it trace entries consumed (see
	// schema.stackOf).
	entryRefs int
	// evStart is the input offset of the first trace entry; evSized that
	// the trace's slice was reserved (see addEvent).
	evStart int64
	evSized bool
	// split is the second decoder whose entries go in the events' slice
	// past its capacity (cut to where they start): A reaching them drops
	// them.
	split *split
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

// addEvent appends a trace entry decoded at input offset at, of an input
// of total bytes (−1: unknown). Entries are kept in chunks that are never
// copied while decoding (a growing slice would copy the whole trace again
// and again). Once reserveAfter entries show how many bytes an entry
// takes, one slice is reserved for those and for what the rest of the
// input holds at that rate, so that allEvents need not join the chunks
// (a join holds the trace twice); an input whose entries get denser than
// that falls back to chunks.
func (l *plist) addEvent(e snapshot.Event, at, total int64) { *l.newEvent(at, total) = e }

// newEvent is addEvent of a zero event, which it returns for the caller
// to fill in place.
func (l *plist) newEvent(at, total int64) *snapshot.Event {
	if l.nEvents == 0 {
		l.evStart = at
	}
	if len(l.events) == cap(l.events) && l.split != nil {
		l.split.abort()
	}
	if len(l.events) == cap(l.events) {
		if l.events != nil {
			l.evDone = append(l.evDone, l.events)
		}
		if n := l.nEvents; !l.evSized && n >= reserveAfter && total > at {
			l.evSized = true
			per := max((at-l.evStart)/int64(n), minEntryBytes)
			rest := (total - at) / per
			l.events = make([]snapshot.Event, 0, int64(n)+rest+rest/16+1)
			for _, c := range l.evDone {
				l.events = append(l.events, c...)
			}
			l.evDone = nil
		} else {
			l.events = make([]snapshot.Event, 0, min(max(256, l.nEvents), 1<<16))
		}
	}
	l.events = l.events[:len(l.events)+1]
	l.nEvents++
	e := &l.events[len(l.events)-1]
	*e = snapshot.Event{}
	return e
}

// reserveAfter is how many trace entries addEvent reads before it reserves
// the whole trace; minEntryBytes the fewest bytes of input it counts an
// entry to take (PyTorch's densest: about 58), so that a file whose first
// entries are tiny cannot make it reserve more than 2.5 bytes of events a
// byte of input.
const (
	reserveAfter  = 1 << 14
	minEntryBytes = 16
)

// allEvents returns the trace entries of the list as one slice.
func (l *plist) allEvents() []snapshot.Event {
	if len(l.evDone) == 0 {
		if spare := cap(l.events) - len(l.events); spare > len(l.events)/8 {
			// Reserved for more than came (other devices' traces followed).
			return slices.Clip(slices.Clone(l.events))
		}
		return l.events
	}
	out := make([]snapshot.Event, 0, l.nEvents)
	for _, c := range l.evDone {
		out = append(out, c...)
	}
	out = append(out, l.events...)
	l.evDone, l.events = nil, nil
	return out
}
