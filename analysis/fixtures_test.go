package analysis

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// Fixtures made with the project's allocator simulator: small snapshots with
// a known truth, for what the real files do not isolate.

const mib = 1 << 20

// rig holds the shared stacks of a simulated training script recorded with
// stacks="python": forward frames through nn.Module.__call__, the grad seed
// of loss.backward(), AdamW's state initialisation, and no frames at all for
// what the autograd engine's C++ threads allocate.
type rig struct {
	s                                   *st.Sim
	fwd, attn, loss, seed, optInit, opt *st.List
	zero                                *st.List
}

func newRig() *rig {
	s := st.NewSim()
	loop := s.F("train.py", 40, "<module>")
	call := s.F("torch/nn/modules/module.py", 1750, "_call_impl")
	return &rig{
		s:       s,
		fwd:     s.Stack(s.F("model.py", 93, "forward"), call, loop),
		attn:    s.Stack(s.F("torch/nn/functional.py", 2140, "softmax"), s.F("model.py", 60, "attention"), s.F("model.py", 95, "forward"), call, loop),
		loss:    s.Stack(s.F("train.py", 42, "<module>")),
		seed:    s.Stack(s.F("torch/autograd/__init__.py", 220, "_make_grads"), s.F("torch/_tensor.py", 626, "backward"), s.F("train.py", 43, "<module>")),
		optInit: s.Stack(s.F("torch/optim/adamw.py", 120, "_init_group"), s.F("torch/optim/optimizer.py", 493, "wrapper"), s.F("train.py", 44, "<module>")),
		opt:     s.Stack(s.F("torch/optim/adamw.py", 300, "_single_tensor_adamw"), s.F("torch/optim/optimizer.py", 493, "wrapper"), s.F("train.py", 44, "<module>")),
		zero:    s.Stack(s.F("torch/optim/optimizer.py", 975, "zero_grad"), s.F("train.py", 45, "<module>")),
	}
}

var paramSizes = []int64{4 * mib, 4 * mib, 1 * mib, 2048}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// step simulates one training step: forward (activations saved for
// backward, a transient, an attention score tensor), the loss, backward
// (the grad seed with frames, then frame-less gradients, scratch and the
// frees of the activations), an AdamW step that creates its state on the
// first call, and zero_grad(set_to_none=True) when zeroGrad is set. It
// returns the gradient addresses still live.
func (r *rig) step(state *[]uint64, grads []uint64, zeroGrad bool) []uint64 {
	s := r.s
	if zeroGrad && grads != nil {
		s.Annotate(0, "Optimizer.zero_grad#AdamW.zero_grad", func() {
			for _, g := range grads {
				s.Free(0, g)
			}
		})
		grads = nil
	}
	a1 := s.Alloc(0, 8*mib, r.fwd)
	a2 := s.Alloc(0, 6*mib, r.attn)
	tmp := s.Alloc(0, 3*mib, r.fwd)
	s.Free(0, tmp)
	a3 := s.Alloc(0, 2*mib, r.fwd)
	loss := s.Alloc(0, 4, r.loss)
	seed := s.Alloc(0, 4, r.seed)
	s.Free(0, seed)
	for _, p := range paramSizes {
		grads = append(grads, s.Alloc(0, p, nil))
		scratch := s.Alloc(0, 5*mib, nil)
		s.Free(0, scratch)
	}
	for _, a := range []uint64{a1, a2, a3} {
		s.Free(0, a)
	}
	s.Annotate(0, "Optimizer.step#AdamW.step", func() {
		if *state == nil {
			for _, p := range paramSizes {
				*state = append(*state, s.Alloc(0, p, r.optInit), s.Alloc(0, p, r.optInit))
			}
		}
		for range paramSizes {
			t := s.Alloc(0, 1*mib, r.opt)
			s.Free(0, t)
		}
	})
	s.Free(0, loss)
	return grads
}

// read pickles a simulated snapshot, first dropping the first `drop` trace
// entries of device 0 (what recording began after, or a ring buffer lost).
func read(t *testing.T, s *st.Sim, drop int) *snapshot.Snapshot {
	t.Helper()
	dict := s.Snapshot()
	if drop > 0 {
		for i, k := range dict.Keys {
			if k == "device_traces" {
				dev0 := dict.Vals[i].(*st.List).Items[0].(*st.List)
				dev0.Items = dev0.Items[drop:]
			}
		}
	}
	data := st.Marshal(dict, 4)
	snap, err := snapshot.Read(bytes.NewReader(data), "fixture.pickle", int64(len(data)), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// traceLen is the number of trace entries the simulator has recorded on
// device 0 so far.
func traceLen(s *st.Sim) int {
	dict := s.Snapshot()
	for i, k := range dict.Keys {
		if k == "device_traces" {
			return len(dict.Vals[i].(*st.List).Items[0].(*st.List).Items)
		}
	}
	return 0
}

func phasesOf(d *result.DeviceResult) []result.Phase {
	var out []result.Phase
	for _, p := range d.Phases {
		out = append(out, p.Phase)
	}
	return out
}

// TestFixtureTraining runs table-driven scenarios of a training loop whose
// parameters were allocated before recording began (no frames) and whose
// backward allocations carry no frames.
func TestFixtureTraining(t *testing.T) {
	P := sum(paramSizes)
	tests := []struct {
		name      string
		steps     int
		zeroGrad  bool // zero_grad at the start of every step after the first
		dropFirst bool // recording began after step 1's forward allocations
		want      result.Categories
		phases    []result.Phase
		rules     []string // rules that must have decided something at the end
	}{
		{
			name: "one step, grads kept", steps: 1,
			want:   result.Categories{result.Parameter: P, result.Gradient: P, result.OptimizerState: 2 * P},
			phases: []result.Phase{result.PhaseForward, result.PhaseBackward, result.PhaseOptimizer, result.PhaseUnknown},
			rules:  []string{RulePreParamPaired, RuleBackwardKeptPaired, RuleOptimizerKept},
		},
		{
			name: "two steps, set_to_none", steps: 2, zeroGrad: true,
			want: result.Categories{result.Parameter: P, result.Gradient: P, result.OptimizerState: 2 * P},
			phases: []result.Phase{result.PhaseForward, result.PhaseBackward, result.PhaseOptimizer, result.PhaseUnknown,
				result.PhaseZeroGrad, result.PhaseForward, result.PhaseBackward, result.PhaseOptimizer, result.PhaseUnknown},
			rules: []string{RulePreParamPaired, RuleBackwardKeptPaired, RuleOptimizerKept},
		},
		{
			// Recording starts after step 1: the optimizer state and the
			// gradients exist before the trace, without frames; zero_grad
			// frees those gradients. Per size there are then three
			// pre-existing blocks for one gradient: one parameter and, the
			// annotation naming AdamW, its two state tensors.
			name: "recording began after step 1", steps: 2, zeroGrad: true, dropFirst: true,
			want: result.Categories{result.Parameter: P, result.Gradient: P, result.OptimizerState: 2 * P},
			// external_annotations still hold step 1's Optimizer.step: a
			// span without events before the first one.
			phases: []result.Phase{result.PhaseOptimizer, result.PhaseZeroGrad, result.PhaseForward, result.PhaseBackward, result.PhaseOptimizer, result.PhaseUnknown},
			rules:  []string{RulePreParamPaired, RuleBackwardKeptPaired, RulePreOptimizerStatePaired},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig()
			s := r.s
			for _, p := range paramSizes {
				s.Alloc(0, p, nil) // model.to(device), before recording
			}
			drop := traceLen(s)
			var state, grads []uint64
			for i := 0; i < tc.steps; i++ {
				grads = r.step(&state, grads, tc.zeroGrad)
				if i == 0 && tc.dropFirst {
					drop = traceLen(s)
				}
			}
			snap := read(t, s, drop)
			if tc.dropFirst {
				// the sim keeps block frames; a block allocated before
				// recording has none in a real file
				for gi := range snap.Devices[0].Segments {
					for bi := range snap.Devices[0].Segments[gi].Blocks {
						snap.Devices[0].Segments[gi].Blocks[bi].Stack = 0
					}
				}
			}
			res := Analyze(snap, DefaultOptions())
			d := res.Devices[0]
			if d.AtEnd.Categories != tc.want {
				t.Errorf("at end %v, want %v", d.AtEnd.Categories, tc.want)
			}
			// every live size is a multiple of 512: requested = rounded
			if d.AtEnd.AllocatedBytes != s.Allocated(0) || d.AtEnd.Categories.Total() != d.AtEnd.AllocatedBytes {
				t.Errorf("allocated %d, categories %d, want %d", d.AtEnd.AllocatedBytes, d.AtEnd.Categories.Total(), s.Allocated(0))
			}
			if got := phasesOf(&d); !slices.Equal(got, tc.phases) {
				t.Errorf("phases %v, want %v", got, tc.phases)
			}
			var rules []string
			for _, u := range d.Rules {
				rules = append(rules, u.Rule)
			}
			for _, want := range tc.rules {
				if !slices.Contains(rules, want) {
					t.Errorf("rules %v lack %s", rules, want)
				}
			}
			if d.AtEnd.ReservedBytes != s.Reserved(0) {
				t.Errorf("reserved %d, want %d", d.AtEnd.ReservedBytes, s.Reserved(0))
			}
		})
	}
}

// TestFixtureOOM checks the OOM post-mortem on simulated failures: a
// fragmented cache (non-expandable segments each holding a 20 MiB tensor
// and 10 MiB free), and an OOM inside the optimizer step.
func TestFixtureOOM(t *testing.T) {
	tests := []struct {
		name       string
		build      func(r *rig) (request int64)
		phase      result.Phase
		site       string
		fragmented bool
		cached     int64 // cached free bytes at the OOM; −1: reserved − allocated
		largest    int64
		want       []string // suggestions that must be there
		dont       []string
	}{
		{
			name: "fragmented cache",
			build: func(r *rig) int64 {
				s := r.s
				for i := 0; i < 5; i++ {
					a := s.Alloc(0, 30*mib, r.fwd) // a new 30 MiB segment
					s.Free(0, a)
					s.Alloc(0, 20*mib, r.fwd) // best fit: splits it, 10 MiB stay cached
				}
				s.OOM(0, 40*mib, 5*mib, r.fwd)
				return 40 * mib
			},
			phase: result.PhaseForward, site: "model.py:93 forward", fragmented: true, cached: 50 * mib, largest: 10 * mib,
			want: []string{"expandable_segments", "activation_checkpointing"},
			dont: []string{"optimizer_8bit", "empty_cache"},
		},
		{
			name: "optimizer state does not fit",
			build: func(r *rig) int64 {
				s := r.s
				for _, p := range paramSizes {
					s.Alloc(0, p, nil)
				}
				var request int64
				s.Annotate(0, "Optimizer.step#AdamW.step", func() {
					for _, p := range paramSizes[:2] {
						s.Alloc(0, p, r.optInit)
						s.Alloc(0, p, r.optInit)
					}
					request = 64 * mib // more than the whole cache holds
					s.OOM(0, request, 512*1024, r.optInit)
				})
				return request
			},
			phase: result.PhaseOptimizer, site: "train.py:44 <module>", cached: -1, largest: 16 * mib,
			want: []string{"optimizer_8bit", "paged_optimizer"},
			dont: []string{"activation_checkpointing", "expandable_segments", "flash_attention"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig()
			request := tc.build(r)
			res := Analyze(read(t, r.s, 0), DefaultOptions())
			o := res.Devices[0].OOM
			if o == nil {
				t.Fatal("no OOM")
			}
			if o.RequestedBytes != request || o.Phase != tc.phase || o.Site != tc.site {
				t.Errorf("oom %d in %s at %q, want %d in %s at %q", o.RequestedBytes, o.Phase, o.Site, request, tc.phase, tc.site)
			}
			fr := o.Fragmentation
			if tc.cached < 0 {
				tc.cached = r.s.Reserved(0) - r.s.Allocated(0)
			}
			if fr.Fragmented != tc.fragmented || fr.CachedFreeBytes != tc.cached || fr.LargestFreeBlockBytes != tc.largest || fr.ExpandableSegments {
				t.Errorf("fragmentation %+v, want fragmented=%v cached=%d largest=%d", fr, tc.fragmented, tc.cached, tc.largest)
			}
			if o.ReservedBytes != r.s.Reserved(0) || o.AllocatedBytes != r.s.Allocated(0) {
				t.Errorf("at the oom %d reserved, %d allocated; want %d, %d", o.ReservedBytes, o.AllocatedBytes, r.s.Reserved(0), r.s.Allocated(0))
			}
			var ids []string
			for _, sg := range res.Suggestions {
				ids = append(ids, sg.ID)
			}
			for _, id := range tc.want {
				if !slices.Contains(ids, id) {
					t.Errorf("suggestions %v lack %s", ids, id)
				}
			}
			for _, id := range tc.dont {
				if slices.Contains(ids, id) {
					t.Errorf("suggestions %v include %s", ids, id)
				}
			}
		})
	}
}

// TestFixtureStateOnly checks a dump without history (enabled="state"):
// categories come from block frames, the peak is the dump. A block without
// frames is unknown: nothing in such a file tells what it is.
func TestFixtureStateOnly(t *testing.T) {
	r := newRig()
	r.s.StateOnly = true
	r.s.Alloc(0, 4*mib, nil)       // no frames: a parameter, but nothing says so
	r.s.Alloc(0, 2*mib, r.optInit) // optimizer state: AdamW's _init_group
	r.s.Alloc(0, 3*mib, r.fwd)     // an activation: forward frames
	res := Analyze(read(t, r.s, 0), DefaultOptions())
	d := res.Devices[0]
	want := result.Categories{result.Unknown: 4 * mib, result.OptimizerState: 2 * mib, result.Activation: 3 * mib}
	if d.AtEnd.Categories != want || d.Peak.AllocatedBytes != 9*mib || d.Peak.EventIndex != -1 || len(d.Phases) != 0 {
		t.Errorf("at end %v, peak %d at %d, %d phases; want %v, 9 MiB at −1, none", d.AtEnd.Categories, d.Peak.AllocatedBytes, d.Peak.EventIndex, len(d.Phases), want)
	}
	if !hasDiag(res, "state_only") || !hasDiag(res, "no_frames_no_history") {
		t.Errorf("diagnostics %v lack state_only or no_frames_no_history", res.Diagnostics)
	}
}

func hasDiag(r *result.Result, kind string) bool {
	for _, d := range r.Diagnostics {
		if d.Kind == kind {
			return true
		}
	}
	return false
}

// TestFixtureHistory checks replay details table-driven: a free requested
// but not completed (record_stream) keeps its block allocated; frees without
// an allocation (recording began mid-step) make the initial state; a
// recording without frames gives no phases.
func TestFixtureHistory(t *testing.T) {
	tests := []struct {
		name  string
		build func(r *rig) (snap *snapshot.Snapshot)
		check func(t *testing.T, h *History, res *result.Result)
	}{
		{
			name: "pending free is active, not allocated",
			build: func(r *rig) *snapshot.Snapshot {
				a := r.s.Alloc(0, 6*mib, r.fwd)
				r.s.MarkPendingFree(0, a)
				snap := read(t, r.s, 0)
				d := snap.Devices[0]
				d.Events = append(d.Events, snapshot.Event{Action: snapshot.ActionFreeRequested, Addr: a, Size: 6 * mib, TimeNS: d.Events[len(d.Events)-1].TimeNS + 1000})
				return snap
			},
			check: func(t *testing.T, h *History, res *result.Result) {
				// PyTorch's memory_allocated() and the dump's allocated_size
				// stop counting a block at free_requested; it stays active
				// (its memory held) until free_completed.
				if got := res.Devices[0].AtEnd.AllocatedBytes; got != 0 {
					t.Errorf("allocated at end %d, want 0 (the block is pending free)", got)
				}
				last := len(h.Device.Events) - 1
				if got := h.AllocatedAt(last - 1); got != 6*mib {
					t.Errorf("allocated before the free %d, want 6 MiB", got)
				}
				b := h.Blocks[0]
				if b.FreeRequested != last || b.Free != -1 || b.Size != 6*mib || b.LiveAt(last) || !b.ActiveAt(last) {
					t.Errorf("block %+v: want free requested at the last event, never completed, active but not allocated", b)
				}
				held := false
				for _, g := range h.StateAt(last) {
					for _, p := range g.Blocks {
						held = held || p.Block == 0 && p.Size == 6*mib
					}
				}
				if !held {
					t.Errorf("the pending-free block is not in the allocator's layout at the end")
				}
			},
		},
		{
			name: "recording began in backward",
			build: func(r *rig) *snapshot.Snapshot {
				s := r.s
				for _, p := range paramSizes {
					s.Alloc(0, p, nil)
				}
				a1 := s.Alloc(0, 8*mib, r.fwd)
				a2 := s.Alloc(0, 6*mib, r.fwd)
				drop := traceLen(s)
				seed := s.Alloc(0, 4, r.seed)
				s.Free(0, seed)
				for _, p := range paramSizes {
					s.Alloc(0, p, nil)
				}
				s.Free(0, a1)
				s.Free(0, a2)
				snap := read(t, s, drop)
				for gi := range snap.Devices[0].Segments {
					for bi := range snap.Devices[0].Segments[gi].Blocks {
						snap.Devices[0].Segments[gi].Blocks[bi].Stack = 0
					}
				}
				return snap
			},
			check: func(t *testing.T, h *History, res *result.Result) {
				P := sum(paramSizes)
				if h.InitialAllocated != P+14*mib {
					t.Errorf("initial allocated %d, want parameters + 14 MiB of activations", h.InitialAllocated)
				}
				if c := h.CategoriesAt(-1); c[result.Activation] != 14*mib || c[result.Parameter] != P {
					t.Errorf("initial categories %v: want the activations freed in backward and the parameters", c)
				}
				d := res.Devices[0]
				lastAlloc := -1
				for i, e := range h.Device.Events {
					if e.Action == snapshot.ActionAlloc {
						lastAlloc = i
					}
				}
				if d.Peak.EventIndex != lastAlloc || d.Peak.AllocatedBytes != 2*P+14*mib {
					t.Errorf("peak %d at %d, want %d after the last gradient", d.Peak.AllocatedBytes, d.Peak.EventIndex, 2*P+14*mib)
				}
				if !hasDiag(res, "trace_starts_mid_run") || !hasDiag(res, "blocks_without_history") {
					t.Errorf("diagnostics %v", res.Diagnostics)
				}
			},
		},
		{
			name: "no frames at all",
			build: func(r *rig) *snapshot.Snapshot {
				a := r.s.Alloc(0, 8*mib, nil) // one 20 MiB segment holds both
				b := r.s.Alloc(0, 8*mib, nil)
				r.s.Free(0, a)
				r.s.Free(0, b)
				return read(t, r.s, 0)
			},
			check: func(t *testing.T, h *History, res *result.Result) {
				if len(h.Phases.Spans) != 1 || h.Phases.Spans[0].Phase != result.PhaseUnknown || !hasDiag(res, "no_phases") || !hasDiag(res, "no_frames") {
					t.Errorf("spans %+v, diagnostics %v: want one unknown span, no_phases and no_frames", h.Phases.Spans, res.Diagnostics)
				}
				if d := res.Devices[0]; d.Peak.AllocatedBytes != 16*mib || d.AtEnd.AllocatedBytes != 0 || d.AtEnd.ReservedBytes != 20*mib {
					t.Errorf("peak %d, end %d / %d", d.Peak.AllocatedBytes, d.AtEnd.AllocatedBytes, d.AtEnd.ReservedBytes)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := tc.build(newRig())
			h := BuildHistory(snap, snap.Devices[0])
			tc.check(t, h, Analyze(snap, DefaultOptions()))
		})
	}
}

// TestFixtureTimeline checks that a thinned timeline keeps the peak and the
// OOM exact and stays within its bound.
func TestFixtureTimeline(t *testing.T) {
	r := newRig()
	s := r.s
	var live []uint64
	for i := 0; i < 6000; i++ {
		size := int64(1+i%7) * mib
		if i == 3333 {
			size = 900 * mib // the peak
		}
		live = append(live, s.Alloc(0, size, r.fwd))
		if len(live) > 3 {
			s.Free(0, live[0])
			live = live[1:]
		}
	}
	s.OOM(0, 4000*mib, mib, r.fwd)
	snap := read(t, s, 0)
	opts := DefaultOptions()
	opts.MaxTimelinePoints = 1000
	res := Analyze(snap, opts)
	d := res.Devices[0]
	tl := d.Timeline
	if n := len(tl.EventIndex); n > opts.MaxTimelinePoints+3 || n < opts.MaxTimelinePoints/2 {
		t.Fatalf("%d points for a bound of %d", n, opts.MaxTimelinePoints)
	}
	if tl.PeakPoint < 0 || tl.Allocated[tl.PeakPoint] != d.Peak.AllocatedBytes || tl.EventIndex[tl.PeakPoint] != d.Peak.EventIndex {
		t.Errorf("peak point %d does not hold the peak %d at %d", tl.PeakPoint, d.Peak.AllocatedBytes, d.Peak.EventIndex)
	}
	if tl.OOMPoint < 0 || tl.EventIndex[tl.OOMPoint] != d.OOM.EventIndex {
		t.Errorf("OOM point %d, want event %d", tl.OOMPoint, d.OOM.EventIndex)
	}
	for i := range tl.EventIndex {
		var c result.Categories
		for k := range c {
			c[k] = tl.ByCategory[k][i]
		}
		if c.Total() != tl.Allocated[i] || (i > 0 && tl.EventIndex[i] <= tl.EventIndex[i-1]) {
			t.Fatalf("point %d: categories %d, allocated %d (or indices not increasing)", i, c.Total(), tl.Allocated[i])
		}
	}
	// Every event's allocated value lies under the thinned maximum of its bucket: the max is kept.
	var max int64
	for _, v := range tl.Allocated {
		max = maxInt(max, v)
	}
	if max != d.Peak.AllocatedBytes {
		t.Errorf("timeline max %d, peak %d", max, d.Peak.AllocatedBytes)
	}
}

func maxInt(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// chromeTrace builds a small Kineto trace: two ProfilerSteps, each with
// zero_grad, a "## forward ##" range on the main thread, autograd
// evaluate_function spans on the autograd thread, and an SGD-with-momentum
// step; [memory] events carry Total Allocated/Reserved.
type traceBuilder struct {
	events []string
	ta     int64
}

func (b *traceBuilder) span(name, cat string, tid int, ts, dur int64) {
	b.events = append(b.events, fmt.Sprintf(`{"ph":"X","cat":%q,"name":%q,"pid":1,"tid":%d,"ts":%d,"dur":%d,"args":{}}`, cat, name, tid, ts, dur))
}

func (b *traceBuilder) mem(tid int, ts int64, addr uint64, bytes int64) {
	b.ta += bytes
	b.events = append(b.events, fmt.Sprintf(`{"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":1,"tid":%d,"ts":%d,"args":{"Device Type":1,"Device Id":0,"Addr":%d,"Bytes":%d,"Total Allocated":%d,"Total Reserved":%d}}`, tid, ts, addr, bytes, b.ta, 64*mib))
}

func TestFixtureChromeTrace(t *testing.T) {
	const baseline = 10 * mib
	b := &traceBuilder{ta: baseline}
	const main, bw = 1, 2
	b.events = append(b.events, `{"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"thread 2 (pt_autograd_0)"}}`)
	var grad uint64
	for step := int64(1); step <= 2; step++ {
		t0 := step * 10000
		b.span(fmt.Sprintf("ProfilerStep#%d", step), "user_annotation", main, t0, 9000)
		b.span("Optimizer.zero_grad#SGD.zero_grad", "user_annotation", main, t0+100, 100)
		if grad != 0 {
			b.mem(main, t0+150, grad, -mib/2) // set_to_none frees last step's gradient
		}
		b.span("## forward ##", "user_annotation", main, t0+1000, 2000)
		act := 0x10000 + uint64(step)*0x1000000
		b.mem(main, t0+1100, act, 4*mib) // saved for backward
		b.mem(main, t0+1200, act+0x400000, mib)
		b.mem(main, t0+1300, act+0x400000, -mib) // transient
		b.span("aten::mm", "cpu_op", main, t0+1500, 100)
		b.mem(main, t0+1510, act+0xc00000, mib) // an intermediate of one op
		b.mem(main, t0+1520, act+0xc00000, -mib)
		if step == 1 {
			b.mem(main, t0+1400, 0x999000, -2048) // allocated before the trace
		}
		b.span("autograd::engine::evaluate_function: AddmmBackward0", "cpu_op", bw, t0+4000, 2000)
		grad = 0x20000 + uint64(step)*0x1000000
		b.mem(bw, t0+4100, grad, mib/2)
		b.mem(bw, t0+4200, act+0x800000, 2*mib) // backward scratch
		b.mem(bw, t0+4300, act+0x800000, -2*mib)
		b.mem(bw, t0+4400, act, -4*mib)
		b.span("Optimizer.step#SGD.step", "user_annotation", main, t0+7000, 1000)
		if step == 1 {
			b.mem(main, t0+7100, 0x30000, mib/2) // momentum buffer, created once
		}
	}
	data := `{"schemaVersion":1,"traceEvents":[` + strings.Join(b.events, ",\n") + `]}`
	snap, err := snapshot.Read(strings.NewReader(data), "fixture.json", int64(len(data)), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res := Analyze(snap, DefaultOptions())
	if len(res.Devices) != 1 {
		t.Fatalf("%d devices", len(res.Devices))
	}
	d := res.Devices[0]
	// End: the untracked baseline (minus the 2 KiB freed in step 1), the
	// momentum buffer, and step 2's gradient.
	want := result.Categories{result.Gradient: mib / 2, result.OptimizerState: mib / 2, result.Unknown: baseline - 2048}
	if d.AtEnd.Categories != want || d.AtEnd.AllocatedBytes != b.ta || d.AtEnd.ReservedBytes != 64*mib {
		t.Errorf("at end %v (%d allocated, %d reserved), want %v (%d)", d.AtEnd.Categories, d.AtEnd.AllocatedBytes, d.AtEnd.ReservedBytes, want, b.ta)
	}
	type sp struct {
		Phase  result.Phase
		Step   int
		Events int
		Peak   int64
	}
	var got []sp
	for _, p := range d.Phases {
		got = append(got, sp{p.Phase, p.Step, p.Events, p.PeakAllocatedBytes})
	}
	B := int64(baseline)
	want1 := []sp{
		{result.PhaseZeroGrad, 1, 0, B},
		{result.PhaseForward, 1, 6, B + 5*mib},
		{result.PhaseBackward, 1, 4, B - 2048 + 4*mib + mib/2 + 2*mib},
		{result.PhaseOptimizer, 1, 1, B - 2048 + mib},
		{result.PhaseZeroGrad, 2, 1, B - 2048 + mib/2}, // a span's peak is after its events
		{result.PhaseForward, 2, 5, B - 2048 + mib/2 + 5*mib},
		{result.PhaseBackward, 2, 4, B - 2048 + mib/2 + 4*mib + mib/2 + 2*mib},
		{result.PhaseOptimizer, 2, 0, B - 2048 + mib},
	}
	if diff := cmp.Diff(want1, got); diff != "" {
		t.Errorf("phase spans (-want +got):\n%s", diff)
	}
	if d.Peak.Step != 2 || d.Peak.Phase != result.PhaseBackward || d.Peak.AllocatedBytes != B-2048+mib/2+4*mib+mib/2+2*mib {
		t.Errorf("peak %+v", d.Peak)
	}
	var rules []string
	for _, u := range d.Rules {
		rules = append(rules, u.Rule)
	}
	slices.Sort(rules)
	if diff := cmp.Diff([]string{RuleOptimizerKept, RuleBackwardKept, RuleBaselineRest}, rules); diff != "" {
		t.Errorf("rules at end (-want +got):\n%s", diff)
	}
	h := BuildHistory(snap, snap.Devices[0])
	cats := map[string]result.Category{}
	for _, bl := range h.Blocks {
		cats[bl.Rule] = bl.Category
	}
	for rule, cat := range map[string]result.Category{RuleSavedForBackward: result.Activation, RuleForwardTransient: result.Temporary, RuleBackwardScratch: result.AutogradDetail,
		RuleFreedByZeroGrad: result.Gradient, RulePreFreedInForward: result.Activation, RuleIntraOp: result.Temporary} {
		if c, ok := cats[rule]; !ok || c != cat {
			t.Errorf("rule %s: category %v (present %v), want %v", rule, c, ok, cat)
		}
	}
}
