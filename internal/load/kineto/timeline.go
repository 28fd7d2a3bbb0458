package kineto

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/torchmem/torchmem/internal/load/jsonlex"
	"github.com/torchmem/torchmem/snapshot"
)

// This file reads the raw export of torch.profiler's export_memory_timeline
// ("….raw.json.gz"): a JSON array of [t_ns, action, ±bytes, category] rows
// written by torch/profiler/_memory_profiler.py (MemoryProfileTimeline). It is
// not a chrome trace, but it is the one file that carries PyTorch's own
// memory categories, so it is read into the model: one device, no addresses.

// Actions of a memory timeline row (torch.profiler._memory_profiler.Action).
const (
	mtPreexisting      = 1
	mtCreate           = 2
	mtIncrementVersion = 3
	mtDestroy          = 4
)

// memoryTimelineCategories are the category indices of the raw export
// (_CATEGORY_TO_INDEX: the order of _CATEGORY_TO_COLORS; 7 is None).
var memoryTimelineCategories = [...]string{
	"PARAMETER", "OPTIMIZER_STATE", "INPUT", "TEMPORARY", "ACTIVATION", "GRADIENT", "AUTOGRAD_DETAIL", "UNKNOWN",
}

// readMemoryTimeline reads the rows of a top-level array whose '[' was
// consumed. PREEXISTING rows (t = −1) become the device Baseline, each kept
// with its category in Device.Preexisting; CREATE and
// DESTROY become alloc and free events; INCREMENT_VERSION's −n/+n pair
// becomes a free and an alloc of the same size (the category changes, the
// total does not). Each event's Meta is "category:NAME".
func (tr *traceReader) readMemoryTimeline() (*snapshot.Snapshot, error) {
	src := tr.src
	src.Format = snapshot.FormatMemoryTimeline
	b := snapshot.NewBuilder(src)
	s := b.Snap
	s.Recording = snapshot.RecordingProfiler
	dec := tr.dec
	d := b.Device(0, snapshot.DeviceCUDA)
	var baseline int64
	var pre []snapshot.Preexisting
	catIDs := map[int64]uint32{}
	var vals [4]int64
	badActions := 0
	for row := 0; ; row++ {
		k := dec.PeekKind()
		if k == ']' {
			break
		}
		off := tr.nextOffset()
		if k != '[' {
			if k == 0 {
				_, err := dec.ReadToken()
				return nil, tr.wrap(err)
			}
			return nil, tr.errAt(off, "not a chrome trace or memory timeline: row %d is %s, not a [t, action, bytes, category] array", row, jsonKindName(k))
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, tr.wrap(err)
		}
		n := 0
		for {
			k := dec.PeekKind()
			if k == ']' {
				break
			}
			v, err := dec.ReadValue()
			if err != nil {
				return nil, tr.wrap(err)
			}
			if n < len(vals) {
				x, ok := jsonlex.ParseInt(v)
				if !ok {
					return nil, tr.errAt(tr.offset()-int64(len(v)), "memory timeline row %d: field %d is not an integer", row, n)
				}
				vals[n] = x
			}
			n++
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, tr.wrap(err)
		}
		if n < 4 {
			return nil, tr.errAt(off, "memory timeline row %d has %d fields, not [t, action, bytes, category]", row, n)
		}
		t, action, nbytes, cat := vals[0], vals[1], vals[2], vals[3]
		id, ok := catIDs[cat]
		if !ok {
			name := "category:" + strconv.FormatInt(cat, 10)
			if cat >= 0 && cat < int64(len(memoryTimelineCategories)) {
				name = "category:" + memoryTimelineCategories[cat]
			}
			id = b.String(name)
			catIDs[cat] = id
		}
		switch action {
		case mtPreexisting:
			// Memory that exists has a size: the rows add up to the
			// baseline, and a negative or huge one would wrap the sum.
			if nbytes < 0 || nbytes > snapshot.MaxDeviceBytes-baseline {
				return nil, tr.errAt(off, "memory timeline row %d: PREEXISTING memory of %d bytes, or of more than %d in all: not a file PyTorch wrote", row, nbytes, int64(snapshot.MaxDeviceBytes))
			}
			baseline += nbytes
			if nbytes > 0 {
				pre = append(pre, snapshot.Preexisting{Size: nbytes, Meta: id})
			}
		case mtCreate, mtDestroy, mtIncrementVersion:
			// Each row becomes its event at once (a 40-byte event for a
			// row of at least 10 bytes): no row is held besides it.
			if nbytes != 0 {
				e := snapshot.Event{TimeNS: t, Meta: id, Action: snapshot.ActionAlloc, Size: nbytes}
				if nbytes < 0 {
					e.Action, e.Size = snapshot.ActionFreeCompleted, -nbytes
				}
				d.Events = append(d.Events, e)
			}
		default:
			badActions++
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, tr.wrap(err)
	}
	if err := tr.checkEOF(); err != nil {
		return nil, err
	}
	s.Source.Bytes = tr.inputOffset(tr.ra.Delivered())
	slices.SortStableFunc(d.Events, func(x, y snapshot.Event) int { return cmp.Compare(x.TimeNS, y.TimeNS) })
	d.Baseline = baseline
	d.Preexisting = pre
	s.Diag("memory_timeline", 0, "a torch.profiler export_memory_timeline raw file, not a chrome trace: one device (assumed cuda:0), events carry PyTorch's categories as Meta \"category:…\"; PREEXISTING rows (memory allocated before profiling) keep theirs")
	s.Diag("bytes_only", 0, "device 0: the memory timeline has no addresses: the curve and categories are right but block lifetimes are unknown")
	if badActions > 0 {
		s.Diag("bad_memory_events", 0, fmt.Sprintf("%d rows with an unknown action were skipped", badActions))
	}
	return s, nil
}
