package pickle

// This file reads the records of a snapshot pickle into the model: trace
// entries, blocks, segments, annotations and the allocator's settings.

import (
	"math"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/snapshot"
)

// event reads one trace entry (device_traces[d][i]).
func (s *schema) event(d *pdict) snapshot.Event {
	a := newEntryFields()
	for i, k := range d.keys {
		s.eventKey(&a, roleOf(k.str()), k, d.vals[i])
	}
	return s.eventDone(&a)
}

// entryFields is a trace entry read so far: the event and the fields that
// make its metadata.
type entryFields struct {
	e                       snapshot.Event
	user, internal, compile string
	deviceFree              int64
}

func newEntryFields() entryFields { return entryFields{e: snapshot.Event{TimeNS: snapshot.NoTime}} }

// eventKey reads the entry's key k of role r and its value v into a, in
// the order of the dict's keys (k's text is read only for roleOther).
func (s *schema) eventKey(a *entryFields, r keyRole, k, v value) {
	e := &a.e
	switch r {
	case roleAction:
		name := asString(v)
		e.Action = snapshot.ParseAction(name)
		if e.Action == snapshot.ActionUnknown {
			name = units.ClipBytes(name, 100)
			s.charge(len(name))
			if len(s.unknownAct) < 100 {
				s.unknownAct[name]++
			}
		}
		if e.Action == snapshot.ActionSegmentMap || e.Action == snapshot.ActionSegmentUnmap {
			s.feats |= featSegMap
		}
	case roleAddr:
		e.Addr = asUint(v)
	case roleSize:
		e.Size = asInt(v)
	case roleStream:
		e.Stream = s.b.Stream(asUint(v))
	case roleDeviceFree:
		a.deviceFree = asInt(v)
	case roleTimeUS:
		e.TimeNS = asInt(v) * 1000
		s.feats |= featTimeUS
	case roleFrames:
		e.Stack = s.stackOf(v, true)
	case roleCompileContext:
		a.compile = asString(v)
		s.feats |= featCompileContext
	case roleUserMetadata:
		a.user = asString(v)
		s.feats |= featUserMetadata
	case roleInternalMetadata:
		a.internal = asString(v)
		s.feats |= featInternalMetadata
	case rolePoolID:
		s.feats |= featEntryPoolID
	case roleCppFrames:
		s.feats |= featCppFrames
	default:
		s.unknown("trace entry", k.str())
	}
}

// eventDone is the event of the entry read into a.
func (s *schema) eventDone(a *entryFields) snapshot.Event {
	e := a.e
	s.finishEvent(&e, a.user, a.internal, a.compile, a.deviceFree)
	return e
}

// finishEvent completes event e of a trace entry from its metadata
// strings and device_free.
func (s *schema) finishEvent(e *snapshot.Event, user, internal, compile string, deviceFree int64) {
	if e.Action == snapshot.ActionOOM {
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
}

func parseState(st string) snapshot.BlockState {
	switch st {
	case "active_allocated":
		return snapshot.BlockActiveAllocated
	case "active_pending_free", "active_awaiting_free":
		return snapshot.BlockActivePendingFree
	case "inactive":
		return snapshot.BlockInactive
	}
	return snapshot.BlockUnknown
}

func (s *schema) block(d *pdict) snapshot.Block {
	var b snapshot.Block
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

func (s *schema) segment(d *pdict) snapshot.Segment {
	var g snapshot.Segment
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
	a := rawAnnotation{timeNS: snapshot.NoTime}
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

func (s *schema) settings(d *pdict) *snapshot.AllocatorSettings {
	st := &snapshot.AllocatorSettings{Other: map[string]string{}}
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
