package snapshot

import (
	"fmt"
	"math"
	"sort"
	"strings"
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
	b          *Builder
	feats      feature
	unknownKey map[string]int // "entry.foo" → count
	unknownAct map[string]int
	mixed      int // generic items found in typed lists
	m          *vm // the machine decoding, nil on the reference path
	generic    int // items kept as generic values in lists (bounded by MaxValues)
}

func newSchema(b *Builder) *schema {
	return &schema{b: b, unknownKey: map[string]int{}, unknownAct: map[string]int{}}
}

// appendItem appends v to list l, reducing it into the model when it is a
// frame, a trace entry, a block, a segment or an annotation. m may be nil
// (reference path), then memo slots are not touched.
func (s *schema) appendItem(l *plist, v value) {
	m := s.m
	switch v.k {
	case kFrame:
		l.frames = append(l.frames, FrameID(v.n))
		return
	case kDict:
		d := v.dict()
		switch shapeOf(d) {
		case shapeFrame:
			id := s.frame(d)
			if m != nil {
				m.replaceMemo(d.memo, value{k: kFrame, n: int64(id)})
			}
			l.frames = append(l.frames, id)
			return
		case shapeEntry:
			l.addEvent(s.event(d))
			s.consumed(m, d)
			return
		case shapeBlock:
			l.blocks = append(l.blocks, s.block(d))
			s.consumed(m, d)
			return
		case shapeSegment:
			l.segs = append(l.segs, s.segment(d))
			s.consumed(m, d)
			return
		case shapeAnnotation:
			l.annots = append(l.annots, s.annotation(d))
			s.consumed(m, d)
			return
		}
	}
	if len(l.frames)+l.nEvents+len(l.blocks)+len(l.segs)+len(l.annots) > 0 {
		s.mixed++
	}
	s.generic++
	l.items = append(l.items, v)
}

func (s *schema) consumed(m *vm, d *pdict) {
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

func (s *schema) unknown(where, key string) {
	if len(s.unknownKey) < 1000 {
		s.unknownKey[where+"."+key]++
	}
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
	return s.b.Frame(f)
}

// stack interns a frames list (or returns an interned one).
func (s *schema) stack(m *vm, v value) StackID {
	switch v.k {
	case kStack:
		return StackID(v.n)
	case kList:
		l := v.list()
		if len(l.items) > 0 {
			// Frames that were not dicts with filename: skip them.
			s.mixed += len(l.items)
		}
		id := s.b.Stack(l.frames)
		if m != nil {
			m.replaceMemo(l.memo, value{k: kStack, n: int64(id)})
			m.recycleList(l)
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
			if e.Action == ActionUnknown && len(s.unknownAct) < 100 {
				s.unknownAct[name]++
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
			e.Stack = s.stack(s.m, v)
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
	hasAddr := false
	for i, k := range d.keys {
		v := d.vals[i]
		switch k.str() {
		case "address":
			b.Address = asUint(v)
			hasAddr = true
			s.feats |= featBlockAddress
		case "size":
			b.Size = asInt(v)
		case "requested_size":
			b.RequestedSize = asInt(v)
		case "state":
			b.State = parseState(asString(v))
		case "frames":
			b.Stack = s.stack(s.m, v)
		case "history":
			s.feats |= featHistory
			// 2.0: history[0] is the most recent allocation in this block.
			if v.k == kList {
				if h := v.list(); len(h.items) > 0 && h.items[0].k == kDict {
					hd := h.items[0].dict()
					if fr, ok := hd.get("frames"); ok && b.Stack == 0 {
						b.Stack = s.stack(s.m, fr)
					}
					if rs, ok := hd.get("real_size"); ok && b.RequestedSize == 0 {
						b.RequestedSize = asInt(rs)
					}
				}
			}
		default:
			s.unknown("block", k.str())
		}
	}
	if !hasAddr {
		b.Address = 0
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
			g.Stack = s.stack(s.m, v)
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
			st.Other[keyString(k)] = render(v, 0)
		}
	}
	return st
}

func keyString(k value) string {
	if k.k == kStr {
		return k.str()
	}
	return render(k, 0)
}

// render prints a small value as Python would (for settings and messages).
func render(v value, depth int) string {
	if depth > 4 {
		return "…"
	}
	switch v.k {
	case kNone:
		return "None"
	case kBool:
		if v.n != 0 {
			return "True"
		}
		return "False"
	case kInt:
		return fmt.Sprint(v.n)
	case kUint:
		return fmt.Sprint(uint64(v.n))
	case kBig:
		return v.bigint().String()
	case kFloat:
		return fmt.Sprint(math.Float64frombits(uint64(v.n)))
	case kStr, kBytes:
		return fmt.Sprintf("%q", v.str())
	case kDict:
		d := v.dict()
		var parts []string
		for i := range d.keys {
			if i == 20 {
				parts = append(parts, "…")
				break
			}
			parts = append(parts, keyString(d.keys[i])+": "+render(d.vals[i], depth+1))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case kList, kTuple:
		l := v.list()
		var parts []string
		for i, it := range l.items {
			if i == 20 {
				parts = append(parts, "…")
				break
			}
			parts = append(parts, render(it, depth+1))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return kindName(v.k)
}

// assemble builds the Snapshot from the decoded top-level value.
func (s *schema) assemble(root value, src Source, proto int) (*Snapshot, error) {
	b := s.b
	snap := b.Snap
	snap.Source = src
	snap.Source.Protocol = proto
	switch root.k {
	case kList:
		snap.Source.Format = FormatSegmentList
		l := root.list()
		if len(l.items) > 0 && len(l.segs) == 0 {
			return nil, &Error{Path: src.Path, Offset: -1, Msg: "a pickled list, but not of memory segments (not a torch.cuda.memory_snapshot() output)"}
		}
		s.addSegments(l.segs)
	case kDict:
		if snap.Source.Format == "" {
			snap.Source.Format = FormatSnapshotPickle
		}
		d := root.dict()
		if !d.has("segments") && !d.has("device_traces") {
			return nil, &Error{Path: src.Path, Offset: -1, Msg: fmt.Sprintf("a pickled dict without segments or device_traces: not a PyTorch memory snapshot (keys: %s)", keysOf(d))}
		}
		for i, k := range d.keys {
			v := d.vals[i]
			snap.Source.Keys = append(snap.Source.Keys, keyString(k))
			switch k.str() {
			case "segments":
				if v.k == kList {
					l := v.list()
					s.addSegments(l.segs)
					if len(l.items) > 0 {
						s.mixed += len(l.items)
					}
				}
			case "device_traces":
				if v.k != kList {
					return nil, &Error{Path: src.Path, Offset: -1, Msg: "device_traces is a " + kindName(v.k) + ", not a list"}
				}
				for dev, tv := range v.list().items {
					dv := b.Device(dev, DeviceCUDA)
					if tv.k == kList {
						tl := tv.list()
						dv.Events = tl.allEvents()
						if len(tl.items) > 0 {
							s.mixed += len(tl.items)
						}
					}
				}
			case "allocator_settings":
				s.feats |= featSettings
				if v.k == kDict {
					snap.Settings = s.settings(v.dict())
				}
			case "external_annotations":
				s.feats |= featAnnotations
				if v.k == kList {
					snap.Annotations = pairAnnotations(v.list().annots)
				}
			case "traces":
				// written by _memory_viz._read when wrapping a segment list; ignore.
			default:
				s.unknown("snapshot", keyString(k))
			}
		}
	default:
		return nil, &Error{Path: src.Path, Offset: -1, Msg: "a pickled " + kindName(root.k) + ", not a PyTorch memory snapshot (a dict or a list of segments)"}
	}
	snap.Source.Generation = s.generation(snap)
	s.diagnose(snap)
	return snap, nil
}

func keysOf(d *pdict) string {
	var ks []string
	for i, k := range d.keys {
		if i == 8 {
			ks = append(ks, "…")
			break
		}
		ks = append(ks, keyString(k))
	}
	return strings.Join(ks, ", ")
}

func (s *schema) addSegments(segs []Segment) {
	for _, g := range segs {
		d := s.b.Device(g.Device, DeviceCUDA)
		d.Segments = append(d.Segments, g)
	}
}

// pairAnnotations pairs START and END entries by device and name, innermost
// first; an unmatched START or END gives an open range.
func pairAnnotations(raw []rawAnnotation) []Annotation {
	type key struct {
		dev  int
		name string
	}
	open := map[key][]int{}
	var out []Annotation
	for _, r := range raw {
		k := key{r.device, r.name}
		switch strings.ToUpper(r.stage) {
		case "START":
			out = append(out, Annotation{Name: r.name, Device: r.device, StartNS: r.timeNS, EndNS: NoTime, Kind: annotationKind(r.name)})
			open[k] = append(open[k], len(out)-1)
		default:
			if st := open[k]; len(st) > 0 {
				out[st[len(st)-1]].EndNS = r.timeNS
				open[k] = st[:len(st)-1]
			} else {
				out = append(out, Annotation{Name: r.name, Device: r.device, StartNS: NoTime, EndNS: r.timeNS, Kind: annotationKind(r.name)})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartNS < out[j].StartNS })
	return out
}

// annotationKind recognises the record_function names PyTorch emits.
func annotationKind(name string) AnnotationKind {
	switch {
	case strings.HasPrefix(name, "ProfilerStep#"):
		return AnnotationStep
	case strings.HasPrefix(name, "Optimizer.step#"):
		return AnnotationOptStep
	case strings.HasPrefix(name, "Optimizer.zero_grad#"):
		return AnnotationZeroGrad
	case strings.HasPrefix(name, "enumerate(DataLoader)#"), strings.HasPrefix(name, "enumerate(DataPipe)#"):
		return AnnotationData
	}
	low := strings.ToLower(name)
	switch {
	case strings.Contains(low, "backward"):
		return AnnotationBackward
	case strings.Contains(low, "forward"):
		return AnnotationForward
	case strings.Contains(low, "zero_grad"):
		return AnnotationZeroGrad
	case strings.Contains(low, "optimizer") || strings.Contains(low, "optim_step") || low == "step":
		return AnnotationOptStep
	}
	return AnnotationUser
}

// generation names the snapshot generation from the features present
// (snapshot-format.md §9).
func (s *schema) generation(snap *Snapshot) string {
	f := s.feats
	switch {
	case f&(featFX|featInternalMetadata|featTraceAllocSettings|featEntryPoolID) != 0:
		return "H (2.11+)"
	case f&featUserMetadata != 0:
		return "G (2.10+)"
	case f&featCompileContext != 0:
		return "F (2.8–2.9)"
	case f&featAnnotations != 0:
		return "E (2.5–2.7)"
	case f&featSettings != 0:
		return "D (2.3–2.4)"
	case f&featTimeUS != 0:
		return "C (2.2)"
	case f&(featPoolID|featExpandable|featBlockAddress|featSegMap) != 0:
		return "B (2.1)"
	case f&featHistory != 0:
		return "A (2.0)"
	}
	return "unknown"
}

// diagnose records what limits trust in the file and how it was recorded.
func (s *schema) diagnose(snap *Snapshot) {
	entries, withStack, cpp, blockFrames := 0, 0, false, false
	maxPerDev := 0
	for _, d := range snap.Devices {
		entries += len(d.Events)
		maxPerDev = max(maxPerDev, len(d.Events))
		for i := range d.Events {
			if d.Events[i].Stack != 0 {
				withStack++
			}
		}
		for _, g := range d.Segments {
			for _, bl := range g.Blocks {
				if bl.Stack != 0 {
					blockFrames = true
				}
			}
		}
	}
	for _, f := range snap.Frames {
		if (f.Line == 0 && (f.Filename == "??" || f.Filename == "" || strings.HasSuffix(f.Filename, ".cpp") || strings.HasSuffix(f.Filename, ".h"))) || strings.Contains(f.Name, "::") {
			cpp = true
			break
		}
	}
	switch {
	case entries == 0 && blockFrames:
		snap.Recording = RecordingState
	case entries == 0:
		snap.Recording = RecordingNone
	case maxPerDev <= 1 && withStack == 0:
		snap.Recording = RecordingState
	case withStack == 0:
		snap.Recording = RecordingNoStacks
	case cpp:
		snap.Recording = RecordingCPP
	default:
		snap.Recording = RecordingPython
	}
	if entries == 0 && snap.Source.Format != FormatSegmentList {
		snap.Diag("no_trace", -1, "no allocator trace entries: only the state at dump time is known (record with torch.cuda.memory._record_memory_history(max_entries=100000))")
	} else if snap.Recording == RecordingState && entries > 0 {
		snap.Diag("state_only", -1, "at most one trace entry per device (enabled=\"state\" or the 2.0 default trace_alloc_max_entries=1): no history, only the state at dump time")
	}
	if snap.Settings != nil && snap.Settings.TraceAllocOverflowed {
		snap.Diag("ring_buffer_overflow", -1, fmt.Sprintf("the trace ring buffer overflowed (max_entries=%d): the oldest events were lost", snap.Settings.TraceAllocMaxEntries))
	}
	for _, d := range snap.Devices {
		if n := unmatchedFrees(d); n > 0 {
			snap.Diag("unmatched_frees", d.ID, fmt.Sprintf("device %d: %d frees of blocks whose allocation is not in the trace (allocated before recording began, or the ring buffer overflowed)", d.ID, n))
		}
	}
	if entries > 0 && withStack == 0 && snap.Recording != RecordingState {
		snap.Diag("no_frames", -1, "trace entries carry no stack frames (record with context=\"all\", stacks=\"python\")")
	}
	for name, n := range s.unknownAct {
		snap.Diag("unknown_action", -1, fmt.Sprintf("%d trace entries with unknown action %q kept as \"unknown\"", n, name))
	}
	if len(s.unknownKey) > 0 {
		var ks []string
		for k, n := range s.unknownKey {
			ks = append(ks, fmt.Sprintf("%s (%d)", k, n))
		}
		sort.Strings(ks)
		if len(ks) > 10 {
			ks = append(ks[:10], "…")
		}
		snap.Diag("skipped_keys", -1, "unknown keys skipped: "+strings.Join(ks, ", "))
	}
	if s.mixed > 0 {
		snap.Diag("skipped_items", -1, fmt.Sprintf("%d list items of an unexpected shape skipped", s.mixed))
	}
}

// unmatchedFrees counts frees in a device trace whose block was never
// allocated earlier in the trace.
func unmatchedFrees(d *Device) int {
	live := map[uint64]int{}
	n := 0
	for i := range d.Events {
		e := &d.Events[i]
		switch e.Action {
		case ActionAlloc:
			live[e.Addr]++
		case ActionFreeRequested:
			if live[e.Addr] == 0 {
				n++
				live[e.Addr] = -1 // count once; free_completed follows
			}
		case ActionFreeCompleted:
			switch c := live[e.Addr]; {
			case c > 0:
				live[e.Addr] = c - 1
			case c < 0:
				delete(live, e.Addr)
			default:
				n++
			}
		}
	}
	return n
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
