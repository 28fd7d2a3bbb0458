package pickle

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/snapshot"
)

// This file turns the decoded top-level value into a Snapshot: devices,
// annotations, the generation told by the keys present, how the file was
// recorded, and the diagnostics that limit trust in it.

// assemble builds the Snapshot from the decoded top-level value.
func (s *schema) assemble(root value, src snapshot.Source, proto int) (*snapshot.Snapshot, error) {
	b := s.b
	snap := b.Snap
	snap.Source = src
	snap.Source.Protocol = proto
	switch root.k {
	case kList:
		snap.Source.Format = snapshot.FormatSegmentList
		l := root.list()
		if len(l.items) > 0 && len(l.segs) == 0 {
			return nil, &snapshot.Error{Path: src.Path, Offset: -1, Msg: "a pickled list, but not of memory segments (not a torch.cuda.memory_snapshot() output)"}
		}
		s.addSegments(l.segs)
	case kDict:
		if snap.Source.Format == "" {
			snap.Source.Format = snapshot.FormatSnapshotPickle
		}
		d := root.dict()
		if !d.has("segments") && !d.has("device_traces") {
			keys := s.keysOf(d)
			if s.err != nil {
				return nil, s.fileError(src)
			}
			return nil, &snapshot.Error{Path: src.Path, Offset: -1, Msg: fmt.Sprintf("a pickled dict without segments or device_traces: not a PyTorch memory snapshot (keys: %s)", keys)}
		}
		for i, k := range d.keys {
			v := d.vals[i]
			key := s.keyText(k)
			snap.Source.Keys = append(snap.Source.Keys, key)
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
					return nil, &snapshot.Error{Path: src.Path, Offset: -1, Msg: "device_traces is a " + kindName(v.k) + ", not a list"}
				}
				if n := len(v.list().items); n > s.maxDevices() {
					return nil, &snapshot.Error{Path: src.Path, Offset: -1, Msg: fmt.Sprintf("device_traces lists %d devices, more than the limit of %d (a machine has at most a few hundred; limit snapshot.Options.MaxDevices)", n, s.maxDevices())}
				}
				for dev, tv := range v.list().items {
					dv := b.Device(dev, snapshot.DeviceCUDA)
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
				s.unknown("snapshot", key)
			}
		}
	default:
		return nil, &snapshot.Error{Path: src.Path, Offset: -1, Msg: "a pickled " + kindName(root.k) + ", not a PyTorch memory snapshot (a dict or a list of segments)"}
	}
	if s.err != nil {
		return nil, s.fileError(src)
	}
	if n := len(snap.Devices); n > s.maxDevices() {
		return nil, &snapshot.Error{Path: src.Path, Offset: -1, Msg: fmt.Sprintf("segments on %d devices, more than the limit of %d (a machine has at most a few hundred; limit snapshot.Options.MaxDevices)", n, s.maxDevices())}
	}
	snap.Source.Generation = s.generation(snap)
	s.diagnose(snap)
	return snap, nil
}

func (s *schema) keysOf(d *pdict) string {
	var ks []string
	for i, k := range d.keys {
		if i == 8 {
			ks = append(ks, "…")
			break
		}
		ks = append(ks, units.ClipBytes(s.keyText(k), 100))
	}
	return strings.Join(ks, ", ")
}

// fileError is the schema's error for the file src.
func (s *schema) fileError(src snapshot.Source) error {
	var e *snapshot.Error
	if errors.As(s.err, &e) && e.Path == "" {
		e.Path = src.Path
	}
	return s.err
}

// maxDevices is the most devices a file may hold.
func (s *schema) maxDevices() int {
	if s.m != nil {
		return s.m.opts.MaxDevices
	}
	return snapshot.DefaultMaxDevices
}

// addSegments files segments under their devices; past the device limit it
// stops (assemble then refuses the file).
func (s *schema) addSegments(segs []snapshot.Segment) {
	for _, g := range segs {
		if len(s.b.Snap.Devices) >= s.maxDevices() && s.b.Snap.Device(g.Device) == nil {
			s.b.Device(g.Device, snapshot.DeviceCUDA) // one past the limit, for the message
			return
		}
		d := s.b.Device(g.Device, snapshot.DeviceCUDA)
		d.Segments = append(d.Segments, g)
	}
}

// pairAnnotations pairs START and END entries by device and name, innermost
// first; an unmatched START or END gives an open range.
func pairAnnotations(raw []rawAnnotation) []snapshot.Annotation {
	type key struct {
		dev  int
		name string
	}
	open := map[key][]int{}
	var out []snapshot.Annotation
	for _, r := range raw {
		r.name = snapshot.CutName(r.name)
		k := key{r.device, r.name}
		switch strings.ToUpper(r.stage) {
		case "START":
			out = append(out, snapshot.Annotation{Name: r.name, Device: r.device, StartNS: r.timeNS, EndNS: snapshot.NoTime, Kind: annotationKind(r.name)})
			open[k] = append(open[k], len(out)-1)
		default:
			if st := open[k]; len(st) > 0 {
				out[st[len(st)-1]].EndNS = r.timeNS
				open[k] = st[:len(st)-1]
			} else {
				out = append(out, snapshot.Annotation{Name: r.name, Device: r.device, StartNS: snapshot.NoTime, EndNS: r.timeNS, Kind: annotationKind(r.name)})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartNS < out[j].StartNS })
	return out
}

// annotationKind classifies a snapshot annotation: PyTorch's own markers,
// then the user's names by the phase words they contain.
func annotationKind(name string) snapshot.AnnotationKind {
	if k, ok := snapshot.PyTorchMarker(name); ok {
		return k
	}
	low := strings.ToLower(name)
	switch {
	case strings.Contains(low, "backward"):
		return snapshot.AnnotationBackward
	case strings.Contains(low, "forward"):
		return snapshot.AnnotationForward
	case strings.Contains(low, "zero_grad"):
		return snapshot.AnnotationZeroGrad
	case strings.Contains(low, "optimizer") || strings.Contains(low, "optim_step") || low == "step":
		return snapshot.AnnotationOptStep
	}
	return snapshot.AnnotationUser
}

// generation names the snapshot generation from the features present
// (the generations of the package documentation).
func (s *schema) generation(snap *snapshot.Snapshot) string {
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
func (s *schema) diagnose(snap *snapshot.Snapshot) {
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
		snap.Recording = snapshot.RecordingState
	case entries == 0:
		snap.Recording = snapshot.RecordingNone
	case maxPerDev <= 1 && withStack == 0:
		snap.Recording = snapshot.RecordingState
	case withStack == 0:
		snap.Recording = snapshot.RecordingNoStacks
	case cpp:
		snap.Recording = snapshot.RecordingCPP
	default:
		snap.Recording = snapshot.RecordingPython
	}
	if entries == 0 && snap.Source.Format != snapshot.FormatSegmentList {
		snap.Diag("no_trace", -1, "no allocator trace entries: only the state at dump time is known (record with torch.cuda.memory._record_memory_history(max_entries=100000))")
	} else if snap.Recording == snapshot.RecordingState && entries > 0 {
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
	if entries > 0 && withStack == 0 && snap.Recording != snapshot.RecordingState {
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
func unmatchedFrees(d *snapshot.Device) int {
	live := newAddrCounts() // allocations at an address not yet freed; −1: an unmatched free
	n := 0
	for i := range d.Events {
		e := &d.Events[i]
		switch e.Action {
		case snapshot.ActionAlloc:
			switch j := live.find(e.Addr); live.vals[j] {
			case 0:
				live.insert(j, e.Addr, 1)
			case -1:
				live.delete(j)
			default:
				live.vals[j]++
			}
		case snapshot.ActionFreeRequested:
			if j := live.find(e.Addr); live.vals[j] == 0 {
				n++
				live.insert(j, e.Addr, -1) // count once; free_completed follows
			}
		case snapshot.ActionFreeCompleted:
			j := live.find(e.Addr)
			switch c := live.vals[j]; {
			case c > 1:
				live.vals[j]--
			case c == 1, c < 0: // keep the table to the live blocks
				live.delete(j)
			default:
				n++
			}
		}
	}
	return n
}
