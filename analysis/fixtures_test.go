package analysis

import (
	"slices"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
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
			rules:  []string{history.RulePreParamPaired, history.RuleBackwardKeptPaired, history.RuleOptimizerKept},
		},
		{
			name: "two steps, set_to_none", steps: 2, zeroGrad: true,
			want: result.Categories{result.Parameter: P, result.Gradient: P, result.OptimizerState: 2 * P},
			phases: []result.Phase{result.PhaseForward, result.PhaseBackward, result.PhaseOptimizer, result.PhaseUnknown,
				result.PhaseZeroGrad, result.PhaseForward, result.PhaseBackward, result.PhaseOptimizer, result.PhaseUnknown},
			rules: []string{history.RulePreParamPaired, history.RuleBackwardKeptPaired, history.RuleOptimizerKept},
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
			rules:  []string{history.RulePreParamPaired, history.RuleBackwardKeptPaired, history.RulePreOptimizerStatePaired},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig()
			s := r.s
			for _, p := range paramSizes {
				s.Alloc(0, p, nil) // model.to(device), before recording
			}
			drop := analysistest.TraceLen(s)
			var state, grads []uint64
			for i := 0; i < tc.steps; i++ {
				grads = r.step(&state, grads, tc.zeroGrad)
				if i == 0 && tc.dropFirst {
					drop = analysistest.TraceLen(s)
				}
			}
			snap := analysistest.Read(t, s, drop)
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
			res := Analyze(analysistest.Read(t, r.s, 0), DefaultOptions())
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
	res := Analyze(analysistest.Read(t, r.s, 0), DefaultOptions())
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
		check func(t *testing.T, h *history.History, res *result.Result)
	}{
		{
			name: "pending free is active, not allocated",
			build: func(r *rig) *snapshot.Snapshot {
				a := r.s.Alloc(0, 6*mib, r.fwd)
				r.s.MarkPendingFree(0, a)
				snap := analysistest.Read(t, r.s, 0)
				d := snap.Devices[0]
				d.Events = append(d.Events, snapshot.Event{Action: snapshot.ActionFreeRequested, Addr: a, Size: 6 * mib, TimeNS: d.Events[len(d.Events)-1].TimeNS + 1000})
				return snap
			},
			check: func(t *testing.T, h *history.History, res *result.Result) {
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
				if int(b.FreeRequested) != last || b.Free != -1 || b.Size != 6*mib || b.LiveAt(last) || !b.ActiveAt(last) {
					t.Errorf("block %+v: want free requested at the last event, never completed, active but not allocated", b)
				}
				held := false
				for _, g := range history.StateAt(h, last) {
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
				drop := analysistest.TraceLen(s)
				seed := s.Alloc(0, 4, r.seed)
				s.Free(0, seed)
				for _, p := range paramSizes {
					s.Alloc(0, p, nil)
				}
				s.Free(0, a1)
				s.Free(0, a2)
				snap := analysistest.Read(t, s, drop)
				for gi := range snap.Devices[0].Segments {
					for bi := range snap.Devices[0].Segments[gi].Blocks {
						snap.Devices[0].Segments[gi].Blocks[bi].Stack = 0
					}
				}
				return snap
			},
			check: func(t *testing.T, h *history.History, res *result.Result) {
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
				return analysistest.Read(t, r.s, 0)
			},
			check: func(t *testing.T, h *history.History, res *result.Result) {
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
			h := history.Build(snap, snap.Devices[0])
			tc.check(t, h, Analyze(snap, DefaultOptions()))
		})
	}
}
