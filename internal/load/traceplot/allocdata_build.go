package traceplot

// This file turns an alloc_data page's elements and actions into the model:
// the events, the blocks live at the start, and the stacks of the suffix
// table.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/snapshot"
)

// allocNotes are the lines _memory_viz puts between an element's header and
// its frames.
var allocNotes = map[string]bool{
	"alloc not recorded, stack trace for free:":                true,
	"<block was allocated before _record_history was enabled>": true,
	"<non-python>": true,
}

// build turns alloc_data into the model: one device (0: the page does not
// say which), an alloc or free event per action, the elements live before
// recording as the device's baseline.
func (ad *allocData) build(src snapshot.Source, end int64) (*snapshot.Snapshot, error) {
	bad := func(format string, args ...any) error {
		return &snapshot.Error{Path: src.Path, Offset: -1, Msg: "trace_plot alloc_data: " + fmt.Sprintf(format, args...)}
	}
	if ad.layout == "" || ad.actions == nil && ad.initial == nil {
		return nil, bad("no elements or actions (not a page of python -m torch.cuda._memory_viz trace_plot)")
	}
	n := len(ad.sizes)
	if len(ad.infos) != n {
		return nil, bad("%d element sizes but %d infos", n, len(ad.infos))
	}
	for i, e := range ad.suffix {
		if e[0] < 0 || int(e[0]) >= len(ad.strs) {
			return nil, bad("suffix_table entry %d names string %d of %d", i, e[0], len(ad.strs))
		}
		if e[1] >= int32(i) || e[1] < -1 {
			return nil, bad("suffix_table entry %d continues at %d, not at an earlier entry", i, e[1])
		}
	}
	for i, info := range ad.infos {
		if info < -1 || int(info) >= len(ad.suffix) {
			return nil, bad("element %d has info %d of %d suffixes", i, info, len(ad.suffix))
		}
	}
	for _, list := range [][]int32{ad.actions, ad.initial} {
		for _, e := range list {
			if e < 0 || int(e) >= n {
				return nil, bad("element %d of %d", e, n)
			}
		}
	}
	// PlotWriter made an element per allocation: the actions name it when
	// it is allocated and when it is freed, and one live before recording
	// only when it is freed. A page naming one more often is not one it
	// wrote, and would make a 40-byte event of every 2 bytes ("0,0,0,…").
	mentions := make([]uint8, n)
	for _, e := range ad.initial {
		mentions[e] = 1
	}
	for i, e := range ad.actions {
		if mentions[e] == 2 {
			return nil, bad("action %d names element %d a third time, or a second time though it was allocated before recording: not a page trace_plot wrote (it allocates and frees an element once)", i, e)
		}
		mentions[e]++
	}
	src.Format = snapshot.FormatTracePlotHTML
	src.Generation = "trace_plot 2022–23"
	src.Keys = ad.keys
	b := snapshot.NewBuilder(src)
	snap := b.Snap
	st := &allocStacks{ad: ad, b: b, frames: make([]int32, len(ad.strs)), stacks: make([]int32, len(ad.suffix)),
		budget: allocFrameBase + allocFramesPerByte*end}
	for i := range st.frames {
		st.frames[i] = -1
	}
	for i := range st.stacks {
		st.stacks[i] = -1
	}
	d := b.Device(0, snapshot.DeviceCUDA)
	live := make([]bool, n)
	var baseline int64
	for _, e := range ad.initial {
		if !live[e] {
			live[e] = true
			baseline += max(ad.sizes[e], 0)
		}
	}
	d.Baseline = baseline
	segments, withStack := 0, 0
	for _, e := range ad.actions {
		stack, err := st.stack(ad.infos[e])
		if err != nil {
			return nil, bad("%v", err)
		}
		addr, seg := st.address(e)
		ev := snapshot.Event{Addr: addr, Size: max(ad.sizes[e], 0), TimeNS: snapshot.NoTime}
		switch {
		case live[e] && seg:
			ev.Action = snapshot.ActionSegmentFree
		case live[e]:
			ev.Action = snapshot.ActionFreeCompleted
		case seg:
			ev.Action = snapshot.ActionSegmentAlloc
		default:
			ev.Action = snapshot.ActionAlloc
		}
		if !live[e] || ad.initial != nil && isInitial(ad, e) {
			ev.Stack = stack // the allocation's frames, or the free's for a block older than the trace
		}
		if seg {
			segments++
		}
		if ev.Stack != 0 {
			withStack++
		}
		live[e] = !live[e]
		d.Events = append(d.Events, ev)
	}
	switch {
	case withStack > 0:
		snap.Recording = snapshot.RecordingPython
	case len(d.Events) > 0:
		snap.Recording = snapshot.RecordingNoStacks
	default:
		snap.Recording = snapshot.RecordingNone
	}
	snap.Diag("trace_plot_alloc_data", -1, fmt.Sprintf("a trace_plot page of 2022–23 (its alloc_data JSON, not a snapshot): one device, whose number the page does not say (shown as 0); no times, segments or reserved memory; %d blocks allocated before recording known by size only", len(ad.initial)))
	if segments > 0 {
		snap.Diag("trace_plot_segments", -1, "the page plotted segments (trace_plot -s): its events are cudaMalloc and cudaFree of segments, not allocations")
	}
	return snap, nil
}

// isInitial reports whether element e was live before recording.
func isInitial(ad *allocData, e int32) bool {
	if ad.initialSet == nil {
		ad.initialSet = make(map[int32]bool, len(ad.initial))
		for _, i := range ad.initial {
			ad.initialSet[i] = true
		}
	}
	return ad.initialSet[e]
}

// allocStacks interns the frames and stacks of an alloc_data page.
type allocStacks struct {
	ad      *allocData
	b       *snapshot.Builder
	frames  []int32 // string index → FrameID, −1 before first use
	stacks  []int32 // suffix index of a chain below a header → StackID, −1 before first use
	scratch []snapshot.FrameID
	budget  int64
}

// stack is the StackID of the element whose info is head: the frames of
// its chain below the header, without notes.
func (st *allocStacks) stack(head int32) (snapshot.StackID, error) {
	if head < 0 {
		return 0, nil
	}
	tail := st.ad.suffix[head][1]
	if tail < 0 {
		return 0, nil
	}
	if id := st.stacks[tail]; id >= 0 {
		return snapshot.StackID(id), nil
	}
	st.scratch = st.scratch[:0]
	for i := tail; i >= 0; i = st.ad.suffix[i][1] {
		if st.budget--; st.budget < 0 {
			return 0, errors.New("the stacks of the page expand to more frames than it can hold (suffix chains naming the same frames over and over)")
		}
		sid := st.ad.suffix[i][0]
		if allocNotes[st.ad.strs[sid]] {
			continue
		}
		if st.frames[sid] < 0 {
			st.frames[sid] = int32(st.b.Frame(parsePlotFrame(st.ad.strs[sid])))
		}
		st.scratch = append(st.scratch, snapshot.FrameID(st.frames[sid]))
	}
	id := st.b.Stack(st.scratch)
	st.stacks[tail] = int32(id)
	return id, nil
}

// address is element e's block address, from its header ("b7f3a2c000000_0
// …", 2023) or made up (2022 pages have none: a distinct 512-aligned one
// per element, never printed), and whether it is a segment.
func (st *allocStacks) address(e int32) (uint64, bool) {
	if head := st.ad.infos[e]; head >= 0 {
		h := st.ad.strs[st.ad.suffix[head][0]]
		if len(h) > 2 && (h[0] == 'b' || h[0] == 's') {
			if us := strings.IndexByte(h, '_'); us > 1 && us <= 17 {
				if a, err := strconv.ParseUint(h[1:us], 16, 64); err == nil {
					return a, h[0] == 's'
				}
			}
		}
	}
	return uint64(e+1) << 9, false
}

// parsePlotFrame parses "file:line:name" (the file may hold colons, the
// name too); anything else is a frame with only a name.
func parsePlotFrame(s string) snapshot.Frame {
	for i := strings.IndexByte(s, ':'); i >= 0 && i+1 < len(s); {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j > i+1 && j < len(s) && s[j] == ':' {
			if line, err := strconv.ParseInt(s[i+1:j], 10, 64); err == nil {
				return snapshot.Frame{Filename: s[:i], Line: line, Name: s[j+1:]}
			}
		}
		k := strings.IndexByte(s[i+1:], ':')
		if k < 0 {
			break
		}
		i += 1 + k
	}
	return snapshot.Frame{Name: s}
}

// The frames an alloc_data page may make the reader walk: suffix chains
// share tails, so a few bytes of JSON can name a stack of thousands of
// frames. A stack is built once per chain below the headers (the headers
// differ per element; the frames below are shared), and all of them
// together may take at most 4M frames plus one per byte of the page (a
// frame costs about 8 bytes: the stack and its key in the intern table).
const (
	allocFrameBase     = 4 << 20
	allocFramesPerByte = 1
)
