package snapshot

import "math"

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
	b          *Builder
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

func newSchema(b *Builder) *schema {
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
		l.frames = append(l.frames, FrameID(v.n))
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
	key = clipKey(key)
	s.charge(len(key))
	if len(s.unknownKey) < 1000 {
		s.unknownKey[where+"."+key]++
	}
}

// clipKey shortens a key or action name kept for a diagnostic to 100 bytes.
func clipKey(k string) string {
	if len(k) > 100 {
		return k[:100] + "…"
	}
	return k
}

func (s *schema) frame(d *pdict) FrameID {
	var f Frame
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
func (s *schema) stack(v value) StackID { return s.stackOf(v, false) }

// stackOf is stack; entry says that a trace entry consumes this reference
// to the list. A list all of whose references trace entries consumed (the
// one it was made with and each memo fetch or DUP: PyTorch shares a
// free_requested's list with its free_completed) is reused for the next
// list; a list another record holds a reference to never is.
func (s *schema) stackOf(v value, entry bool) StackID {
	m := s.m
	switch v.k {
	case kStack:
		return StackID(v.n)
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

func (s *schema) event(d *pdict) Event {
	e := Event{TimeNS: NoTime}
	var user, internal, compile string
	var deviceFree int64
	for i, k := range d.keys {
		v := d.vals[i]
		switch k.str() {
		case "action":
			name := asString(v)
			e.Action = ParseAction(name)
			if e.Action == ActionUnknown {
				name = clipKey(name)
				s.charge(len(name))
				if len(s.unknownAct) < 100 {
					s.unknownAct[name]++
				}
			}
			if e.Action == ActionSegmentMap || e.Action == ActionSegmentUnmap {
				s.feats |= featSegMap
			}
		case "addr":
			e.Addr = asUint(v)
		case "size":
			e.Size = asInt(v)
		case "stream":
			e.Stream = s.b.Stream(asUint(v))
		case "device_free":
			deviceFree = asInt(v)
		case "time_us":
			e.TimeNS = asInt(v) * 1000
			s.feats |= featTimeUS
		case "frames":
			e.Stack = s.stackOf(v, true)
		case "compile_context":
			compile = asString(v)
			s.feats |= featCompileContext
		case "user_metadata":
			user = asString(v)
			s.feats |= featUserMetadata
		case "internal_metadata":
			internal = asString(v)
			s.feats |= featInternalMetadata
		case "pool_id", "segment_pool_id":
			s.feats |= featEntryPoolID
		case "cpp_frames":
			s.feats |= featCppFrames
		default:
			s.unknown("trace entry", k.str())
		}
	}
	if e.Action == ActionOOM {
		e.Addr = uint64(deviceFree) // PyTorch's C++ keeps it in addr too
	}
	s.charge(len(user) + len(internal) + len(compile))
	switch {
	case user != "":
		e.Meta = s.b.String(user)
	case internal != "":
		e.Meta = s.b.String(internal)
	case compile != "" && compile != "N/A":
		e.Meta = s.b.String(compile)
	}
	return e
}

func parseState(st string) BlockState {
	switch st {
	case "active_allocated":
		return BlockActiveAllocated
	case "active_pending_free", "active_awaiting_free":
		return BlockActivePendingFree
	case "inactive":
		return BlockInactive
	}
	return BlockUnknown
}

func (s *schema) block(d *pdict) Block {
	var b Block
	for i, k := range d.keys {
		v := d.vals[i]
		switch k.str() {
		case "address":
			b.Address = asUint(v)
			s.feats |= featBlockAddress
		case "size":
			b.Size = asInt(v)
		case "requested_size":
			b.RequestedSize = asInt(v)
		case "state":
			b.State = parseState(asString(v))
		case "frames":
			b.Stack = s.stack(v)
		case "history":
			s.feats |= featHistory
			// 2.0: history[0] is the most recent allocation in this block.
			if v.k == kList {
				if h := v.list(); len(h.items) > 0 && h.items[0].k == kDict {
					hd := h.items[0].dict()
					if fr, ok := hd.get("frames"); ok && b.Stack == 0 {
						b.Stack = s.stack(fr)
					}
					if rs, ok := hd.get("real_size"); ok && b.RequestedSize == 0 {
						b.RequestedSize = asInt(rs)
					}
				}
				s.release(v, 2) // the history list is done with
			}
		default:
			s.unknown("block", k.str())
		}
	}
	return b
}

func (s *schema) segment(d *pdict) Segment {
	var g Segment
	var blocks *plist
	for i, k := range d.keys {
		v := d.vals[i]
		switch k.str() {
		case "device":
			g.Device = int(asInt(v))
		case "address":
			g.Address = asUint(v)
		case "total_size":
			g.TotalSize = asInt(v)
		case "allocated_size":
			g.AllocatedSize = asInt(v)
		case "active_size":
			g.ActiveSize = asInt(v)
		case "requested_size":
			g.RequestedSize = asInt(v)
		case "stream":
			g.Stream = asUint(v)
		case "segment_type":
			g.Type = asString(v)
		case "segment_pool_id":
			s.feats |= featPoolID
			if v.k == kTuple || v.k == kList {
				if it := v.list().items; len(it) == 2 {
					g.PoolID = [2]int64{asInt(it[0]), asInt(it[1])}
				}
			}
		case "is_expandable":
			s.feats |= featExpandable
			g.IsExpandable = asBool(v)
		case "frames":
			g.Stack = s.stack(v)
		case "blocks":
			if v.k == kList {
				blocks = v.list()
			}
		default:
			s.unknown("segment", k.str())
		}
	}
	if blocks != nil {
		g.Blocks = blocks.blocks
		if len(blocks.items) > 0 {
			s.mixed += len(blocks.items)
		}
		// 2.0 blocks have no address: walk the segment, as MemoryViz does.
		if s.feats&featBlockAddress == 0 || (len(g.Blocks) > 0 && g.Blocks[0].Address == 0) {
			addr := g.Address
			for i := range g.Blocks {
				g.Blocks[i].Address = addr
				addr += uint64(g.Blocks[i].Size)
			}
		}
	}
	return g
}

func (s *schema) annotation(d *pdict) rawAnnotation {
	a := rawAnnotation{timeNS: NoTime}
	for i, k := range d.keys {
		v := d.vals[i]
		switch k.str() {
		case "stage":
			a.stage = asString(v)
		case "name":
			a.name = asString(v)
		case "device":
			a.device = int(asInt(v))
		case "time_us":
			a.timeNS = asInt(v) * 1000
		default:
			s.unknown("annotation", k.str())
		}
	}
	s.charge(len(a.stage) + len(a.name))
	return a
}

func (s *schema) settings(d *pdict) *AllocatorSettings {
	st := &AllocatorSettings{Other: map[string]string{}}
	for i, k := range d.keys {
		v := d.vals[i]
		switch k.str() {
		case "PYTORCH_CUDA_ALLOC_CONF":
			st.AllocConf = asString(v)
		case "max_split_size":
			st.MaxSplitSize = asInt(v)
		case "garbage_collection_threshold":
			if v.k == kFloat {
				st.GCThreshold = math.Float64frombits(uint64(v.n))
			} else {
				st.GCThreshold = float64(asInt(v))
			}
		case "expandable_segments":
			st.ExpandableSegments = asBool(v)
		case "trace_alloc_max_entries":
			st.TraceAllocMaxEntries = asInt(v)
			s.feats |= featTraceAllocSettings
		case "trace_alloc_overflowed":
			st.TraceAllocOverflowed = asBool(v)
			s.feats |= featTraceAllocSettings
		default:
			st.Other[s.keyText(k)] = s.render(v)
		}
	}
	return st
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

// shapeOf tells a dict's shape in one pass over its keys: a frame has
// filename (or name and line), a trace entry action, a block state and size,
// a segment blocks or total_size, an annotation stage and name.
func shapeOf(d *pdict) dictShape {
	var filename, name, line, action, state, size, blocks, total, stage bool
	for _, k := range d.keys {
		if k.k != kStr {
			continue
		}
		switch k.str() {
		case "action":
			action = true
		case "filename":
			filename = true
		case "name":
			name = true
		case "line":
			line = true
		case "state":
			state = true
		case "size":
			size = true
		case "blocks":
			blocks = true
		case "total_size":
			total = true
		case "stage":
			stage = true
		}
	}
	switch {
	case filename || (name && line):
		return shapeFrame
	case action:
		return shapeEntry
	case state && size:
		return shapeBlock
	case blocks || total:
		return shapeSegment
	case stage && name:
		return shapeAnnotation
	}
	return shapeOther
}
