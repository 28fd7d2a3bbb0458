package pickle

import (
	"math"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/snapshot"
)

// This file maps pickle values onto the model. Features are detected by the
// keys present, never by a version number; unknown keys are counted and
// skipped, unknown actions are kept as ActionUnknown.

// rawAnnotation is one external_annotations entry before START/END pairing.
type rawAnnotation struct {
	stage  string
	name   string
	device int
	timeNS int64
}

// feature bits: which keys were seen, to name the generation.
type feature uint32

const (
	featHistory feature = 1 << iota
	featBlockAddress
	featPoolID
	featExpandable
	featSegMap
	featTimeUS
	featSettings
	featAnnotations
	featCompileContext
	featUserMetadata
	featEntryPoolID
	featFX
	featInternalMetadata
	featTraceAllocSettings
	featCppFrames
)

// schema holds the state of the conversion while a pickle is decoded.
type schema struct {
	b          *snapshot.Builder
	feats      feature
	unknownKey map[string]int // "entry.foo" → count
	unknownAct map[string]int
	mixed      int   // generic items found in typed lists
	m          *vm   // the machine decoding, nil on the reference path
	generic    int   // items kept as generic values in lists (bounded by MaxValues)
	expanded   int64 // bytes of strings handled for records (see charge)
	rendered   int64 // bytes of text rendered from values (see render)
	err        error // the first bound the file broke; the machine stops on it
	// inputBytes is the size of the pickle when known (a file not
	// gzipped), else −1: the trace's slice is reserved from it.
	inputBytes int64
}

func newSchema(b *snapshot.Builder) *schema {
	return &schema{b: b, unknownKey: map[string]int{}, unknownAct: map[string]int{}, inputBytes: -1}
}

// appendItem appends v to list l, reducing it into the model when it is a
// frame, a trace entry, a block, a segment or an annotation. m may be nil
// (reference path), then memo slots are not touched.
func (s *schema) appendItem(l *plist, v value) {
	if s.err != nil {
		return // the machine stops after this opcode
	}
	m := s.m
	switch v.k {
	case kFrame:
		l.frames = append(l.frames, snapshot.FrameID(v.n))
		return
	case kDict:
		d := v.dict()
		if d.frame > 0 { // fetched before its first reduction
			l.frames = append(l.frames, d.frame-1)
			return
		}
		if d.reduced {
			s.failOnce("a trace entry, block, segment or annotation referenced twice (not produced by PyTorch)")
			return
		}
		if !d.shaped {
			d.shape, d.shaped = shapeOf(d), true
		}
		switch d.shape {
		case shapeFrame:
			id := s.frame(d)
			if m != nil {
				m.replaceMemo(d.memo, value{k: kFrame, n: int64(id)})
			}
			d.frame = id + 1
			s.hold(-dictBytes - entryBytes*int64(len(d.keys)))
			l.frames = append(l.frames, id)
			return
		case shapeEntry:
			at := int64(-1)
			if m != nil {
				at = m.off
			}
			l.addEvent(s.event(d), at, s.inputBytes)
			s.consumed(d)
			return
		case shapeBlock:
			l.blocks = append(l.blocks, s.block(d))
			s.consumed(d)
			return
		case shapeSegment:
			l.segs = append(l.segs, s.segment(d))
			s.consumed(d)
			return
		case shapeAnnotation:
			l.annots = append(l.annots, s.annotation(d))
			s.consumed(d)
			return
		}
	}
	if len(l.frames)+l.nEvents+len(l.blocks)+len(l.segs)+len(l.annots) > 0 {
		s.mixed++
	}
	s.generic++
	l.items = append(l.items, v)
}

// consumed retires a dict reduced into the model: its memo slot becomes a
// tombstone and the dict is reused (streaming decoder only).
func (s *schema) consumed(d *pdict) {
	d.reduced = true
	s.hold(-dictBytes - entryBytes*int64(len(d.keys)))
	m := s.m
	if m != nil {
		m.replaceMemo(d.memo, value{k: kGone})
		m.recycle(d)
	}
}

// Integer conversions. Values beyond int64 keep their bits (uint64), so an
// XPU pointer above 2^63 survives and line 2^64−1 reads as −1.
func asInt(v value) int64 {
	switch v.k {
	case kInt, kUint, kBool:
		return v.n
	case kFloat:
		return int64(math.Float64frombits(uint64(v.n)))
	case kBig:
		x := v.bigint()
		if x.Sign() < 0 {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	return 0
}

func asUint(v value) uint64 { return uint64(asInt(v)) }

func asString(v value) string {
	if v.k == kStr || v.k == kBytes {
		return v.str()
	}
	return ""
}

func asBool(v value) bool {
	switch v.k {
	case kBool, kInt:
		return v.n != 0
	}
	return false
}

// unknown counts an unknown key (its first 100 bytes: a key is hashed and
// copied here, and may be memo-shared by a million dicts).
func (s *schema) unknown(where, key string) {
	key = units.ClipBytes(key, 100)
	s.charge(len(key))
	if len(s.unknownKey) < 1000 {
		s.unknownKey[where+"."+key]++
	}
}

func (s *schema) frame(d *pdict) snapshot.FrameID {
	var f snapshot.Frame
	for i, k := range d.keys {
		v := d.vals[i]
		switch k.str() {
		case "filename":
			f.Filename = asString(v)
		case "line":
			f.Line = asInt(v)
		case "name":
			f.Name = asString(v)
		case "fx_node_op":
			f.FXNodeOp = asString(v)
			s.feats |= featFX
		case "fx_node_name":
			f.FXNodeName = asString(v)
			s.feats |= featFX
		case "fx_node_target":
			f.FXNodeTarget = asString(v)
			s.feats |= featFX
		case "fx_original_trace":
			f.FXOriginalTrace = asString(v)
			s.feats |= featFX
		default:
			s.unknown("frame", k.str())
		}
	}
	s.charge(len(f.Filename) + len(f.Name) + len(f.FXNodeOp) + len(f.FXNodeName) + len(f.FXNodeTarget) + len(f.FXOriginalTrace))
	return s.b.Frame(f)
}

// stack interns a frames list (or returns an interned one).
func (s *schema) stack(v value) snapshot.StackID { return s.stackOf(v, false) }

// stackOf is stack; entry says that a trace entry consumes this reference
// to the list. A list all of whose references trace entries consumed (the
// one it was made with and each memo fetch or DUP: PyTorch shares a
// free_requested's list with its free_completed) is reused for the next
// list; a list another record holds a reference to never is.
func (s *schema) stackOf(v value, entry bool) snapshot.StackID {
	m := s.m
	switch v.k {
	case kStack:
		return snapshot.StackID(v.n)
	case kList:
		l := v.list()
		if entry {
			l.entryRefs++
		}
		if l.stack > 0 { // fetched before its first reduction
			id := l.stack - 1
			if m != nil && entry && l.entryRefs == 1+l.gets {
				m.reuseList(l)
			}
			return id
		}
		if len(l.items) > 0 {
			// Frames that were not dicts with filename: skip them.
			s.mixed += len(l.items)
		}
		id := s.b.Stack(l.frames)
		l.stack = id + 1
		s.hold(-listBytes)
		if m != nil {
			m.replaceMemo(l.memo, value{k: kStack, n: int64(id)})
			if l.gets == 0 {
				m.reuseList(l)
			}
		}
		return id
	}
	return 0
}

// dictShape is what a dict of a snapshot is, told by its keys.
type dictShape uint8

const (
	shapeOther dictShape = iota
	shapeFrame
	shapeEntry
	shapeBlock
	shapeSegment
	shapeAnnotation
)

// shapeOf tells a dict's shape in one pass over its keys (shapeOfRoles).
func shapeOf(d *pdict) dictShape {
	var roles roleSet
	for _, k := range d.keys {
		roles |= 1 << roleOf(k.str())
	}
	return shapeOfRoles(roles)
}
