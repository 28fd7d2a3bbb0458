package history

import (
	"testing"

	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestCurvesFromMarks: the history keeps the allocated and requested bytes
// every curveMark events and replays the rest from the blocks. After every
// event of every real file and of simulated runs, AllocatedAt and
// RequestedAt must equal the sums over the blocks live then (Block.LiveAt,
// computed apart from the marks), allocatedRange must agree with
// AllocatedAt, and ReservedAt must follow the segment events (or the
// trace's counter) from the dump backwards.
func TestCurvesFromMarks(t *testing.T) {
	inputs := map[string]*snapshot.Snapshot{}
	for _, c := range []st.LeakConfig{st.DefaultLeakConfig, {Layers: 3, Hidden: 128, Tokens: 300, Vocab: 500, Steps: 5, Stacks: st.StacksCpp}} {
		inputs["train "+c.Stacks.String()] = analysistest.Read(t, st.TrainLoopHealthy(c), 0)
	}
	inputs["demo"] = analysistest.Read(t, st.Train(st.DemoConfig), 0)
	for _, path := range st.SharedInputs(t) {
		s, err := load.Open(path, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		inputs[path] = s
	}
	checked := 0
	for name, s := range inputs {
		for _, d := range s.Devices {
			h := Build(s, d)
			n := h.NumEvents()
			// Check every event of small devices, and about 3,000 spread
			// over the larger ones (each check sums all blocks).
			every := max(1, n/3000)
			var prev int64
			for i, v := range h.AllocatedRange(0, n-1) {
				if i == 0 && h.AllocatedAt(-1) != h.InitialAllocated {
					t.Fatalf("%s device %d: AllocatedAt(-1) %d, initial %d", name, d.ID, h.AllocatedAt(-1), h.InitialAllocated)
				}
				prev = v
				if i%every != 0 && i != n-1 && i%curveMark != 0 && (i+1)%curveMark != 0 {
					continue
				}
				var alloc, req int64
				for _, b := range h.LiveBlocks(i) {
					alloc += b.Size
					req += b.Requested
				}
				if v != alloc || h.AllocatedAt(i) != alloc || h.RequestedAt(i) != req {
					t.Fatalf("%s device %d event %d: range %d, AllocatedAt %d, RequestedAt %d; the live blocks hold %d, requested %d",
						name, d.ID, i, v, h.AllocatedAt(i), h.RequestedAt(i), alloc, req)
				}
				checked++
			}
			if n > 0 && prev != h.AllocatedAt(n-1) {
				t.Errorf("%s device %d: the range ends at %d, AllocatedAt(last) %d", name, d.ID, prev, h.AllocatedAt(n-1))
			}
			checkReserved(t, name, h)
		}
	}
	t.Logf("%d events checked in %d inputs", checked, len(inputs))
}

// checkReserved replays the reserved bytes forward from ReservedAt(−1) by
// the segment events (snapshots) or reads the trace's counter points, and
// compares each event's with ReservedAt.
func checkReserved(t *testing.T, name string, h *History) {
	t.Helper()
	d := h.Device
	cur := h.ReservedAt(-1)
	pi := 0
	for i := range d.Events {
		if len(d.Reserved) > 0 {
			for pi < len(d.Reserved) && d.Reserved[pi].Event <= i {
				cur = d.Reserved[pi].Value
				pi++
			}
		} else {
			switch e := &d.Events[i]; e.Action {
			case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
				cur += e.Size
			case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
				cur -= e.Size
			}
		}
		if got := h.ReservedAt(i); got != cur {
			t.Fatalf("%s device %d event %d: ReservedAt %d, replayed %d", name, d.ID, i, got, cur)
		}
	}
	if len(d.Reserved) == 0 && len(d.Segments) > 0 && len(d.Events) > 0 && !h.ReservedClamped {
		var end int64
		for gi := range d.Segments {
			end += d.Segments[gi].TotalSize
		}
		if cur != end {
			t.Errorf("%s device %d: the reserved curve ends at %d, the dump's segments total %d", name, d.ID, cur, end)
		}
	}
}

// TestStepAndSpanFromRuns: once the phases are computed, the step and the
// span of an event are looked up from runs, not kept per event. Every event
// of a span with events must answer that span and its step, on every real
// file and simulated runs with steps of each source.
func TestStepAndSpanFromRuns(t *testing.T) {
	inputs := map[string]*snapshot.Snapshot{}
	for _, c := range []st.LeakConfig{st.DefaultLeakConfig, {Layers: 2, Hidden: 64, Tokens: 128, Vocab: 100, Steps: 6, Profiler: true}} {
		inputs["train "+c.Stacks.String()] = analysistest.Read(t, st.TrainLoopHealthy(c), 0)
		inputs["eval "+c.Stacks.String()] = analysistest.Read(t, st.EvalLoop(c, true), 0)
	}
	for _, path := range st.SharedInputs(t) {
		s, err := load.Open(path, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		inputs[path] = s
	}
	for name, s := range inputs {
		for _, d := range s.Devices {
			h := Build(s, d)
			covered := 0
			for si, sp := range h.Phases.Spans {
				for k := sp.StartEvent; sp.Events > 0 && k <= sp.EndEvent; k++ {
					if h.Phases.SpanAt(k) != si || h.Phases.StepAt(k) != sp.Step {
						t.Fatalf("%s device %d event %d: span %d step %d, want span %d step %d", name, d.ID, k, h.Phases.SpanAt(k), h.Phases.StepAt(k), si, sp.Step)
					}
					covered++
				}
			}
			if n := h.NumEvents(); covered != n || h.Phases.SpanAt(n) != -1 || h.Phases.SpanAt(-1) != -1 {
				t.Errorf("%s device %d: spans cover %d of %d events", name, d.ID, covered, n)
			}
			if n := h.NumEvents(); n > 0 && h.Phases.StepAt(-1) != h.Phases.StepAt(0) {
				t.Errorf("%s device %d: before the first event step %d, the first event's %d", name, d.ID, h.Phases.StepAt(-1), h.Phases.StepAt(0))
			}
		}
	}
}
