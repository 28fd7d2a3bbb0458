package analysis

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/analysis/suggest"
	"github.com/torchmem/torchmem/analysis/whatif"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// fsdpRun records one rank of a training script sharded with FSDP2
// (fully_shard on each layer, reshard after forward, world size 2, AdamW,
// zero_grad(set_to_none=True)): each layer's weight kept as a shard of half
// its bytes; before a layer's forward and again before its backward the
// layer gathers its whole weight (the all-gather's flat output, then the
// unsharded parameter copied out of it, the output freed), and frees it
// after; backward's gradient of the whole weight is copied into the
// reduce-scatter's input and freed, and the reduce-scatter leaves the
// gradient's shard, kept until zero_grad. Forward's FSDP spans are in the
// snapshot's annotations (record_function on the main thread); backward's
// run on the autograd thread, whose spans a snapshot does not record.
type fsdpRun struct {
	layers         int
	hidden, tokens int64
	steps          int

	// set by run: what each allocation is, in allocation order
	// ("gathered", "reduce", or "" for the rest), and the shards' bytes
	kinds      []string
	shardBytes int64
}

func (c *fsdpRun) run(x fx) {
	s := x.s
	h := c.hidden
	alloc := func(kind string, n int64, stack *st.List) uint64 {
		c.kinds = append(c.kinds, kind)
		return s.Alloc(0, n, stack)
	}
	fsdp := func(file string, line int, name string) *st.Dict {
		return s.F("torch/distributed/fsdp/_fully_shard/"+file, line, name)
	}
	user := func(line int, name string) *st.Dict { return s.F("train.py", line, name) }
	call := s.F("torch/nn/modules/module.py", 1787, "_call_impl")
	empty := []string{"at::native::empty_cuda(c10::ArrayRef<long>)"}
	initSt := x.stack(empty, []*st.Dict{fsdp("_fsdp_param.py", 366, "_init_sharded_param"), fsdp("_fsdp_param.py", 240, "__init__"),
		fsdp("_fsdp_param_group.py", 135, "__init__"), fsdp("_fully_shard.py", 201, "fully_shard")}, []*st.Dict{user(14, "<module>")})
	hook := func(phase string) []*st.Dict {
		if phase == "forward" {
			return []*st.Dict{fsdp("_fsdp_param_group.py", 329, "pre_forward"), fsdp("_fsdp_state.py", 245, "_pre_forward"), call}
		}
		return []*st.Dict{fsdp("_fsdp_param_group.py", 472, "pre_backward"), fsdp("_fsdp_state.py", 290, "_pre_backward")}
	}
	gatherSt := func(phase string) *st.List {
		return x.stack(empty, append([]*st.Dict{fsdp("_fsdp_collectives.py", 64, "allocate"), fsdp("_fsdp_collectives.py", 225, "foreach_all_gather"),
			fsdp("_fsdp_param_group.py", 291, "unshard")}, hook(phase)...), []*st.Dict{user(22, "<module>")})
	}
	copyOutSt := func(phase string) *st.List {
		return x.stack(empty, append([]*st.Dict{fsdp("_fsdp_param.py", 940, "alloc_storage"), fsdp("_fsdp_param.py", 560, "alloc_all_gather_outputs"),
			fsdp("_fsdp_collectives.py", 318, "foreach_all_gather_copy_out"), fsdp("_fsdp_param_group.py", 330, "wait_for_unshard")}, hook(phase)...), []*st.Dict{user(22, "<module>")})
	}
	reduceSt := x.stack(empty, []*st.Dict{fsdp("_fsdp_collectives.py", 64, "allocate"), fsdp("_fsdp_collectives.py", 452, "foreach_reduce"),
		fsdp("_fsdp_param_group.py", 520, "post_backward")}, nil)
	fwdSt := func(l int) *st.List {
		return x.stack(cppAddmm, []*st.Dict{s.F("torch/nn/modules/linear.py", 125, "forward"), call}, []*st.Dict{s.F("model.py", 40+l, "forward"), user(22, "<module>")})
	}
	bwd := x.stack(cppMmBwd, nil, nil)
	opt := x.stack(cppAdam, []*st.Dict{s.F("torch/optim/adamw.py", 180, "_init_group"), s.F("torch/optim/adamw.py", 230, "step")}, []*st.Dict{user(24, "<module>")})

	weight := 4 * h * h
	shard := weight / 2
	for range c.layers {
		alloc("", shard, initSt)
		c.shardBytes += shard
	}
	gather := func(l int, phase string) uint64 {
		var out, unsharded uint64
		do := func(name string, fn func()) {
			if phase == "forward" {
				s.Annotate(0, fmt.Sprintf("FSDP::%s (layers.%d)", name, l), fn)
			} else {
				fn()
			}
		}
		do("all_gather", func() { out = alloc("gathered", weight, gatherSt(phase)) })
		do("all_gather_copy_out", func() {
			unsharded = alloc("gathered", weight, copyOutSt(phase))
			s.Free(0, out)
		})
		return unsharded
	}
	var grads, state []uint64
	for range c.steps {
		x0 := alloc("", c.tokens*8, x.stack([]string{"at::native::randint(long, c10::ArrayRef<long>)"}, nil, []*st.Dict{user(20, "<module>")}))
		var saved []uint64
		s.Annotate(0, "## forward ##", func() {
			for l := range c.layers {
				var unsharded uint64
				s.Annotate(0, fmt.Sprintf("FSDP::pre_forward (layers.%d)", l), func() { unsharded = gather(l, "forward") })
				saved = append(saved, alloc("", c.tokens*h*4, fwdSt(l)))
				s.Annotate(0, fmt.Sprintf("FSDP::post_forward (layers.%d)", l), func() { s.Free(0, unsharded) })
			}
		})
		s.Annotate(0, "backward", func() {
			for l := c.layers - 1; l >= 0; l-- {
				unsharded := gather(l, "backward")
				g := alloc("", c.tokens*h*4, bwd)
				gw := alloc("", weight, bwd)
				in := alloc("reduce", weight, reduceSt)
				s.Free(0, gw)
				sg := alloc("reduce", shard, reduceSt)
				grads = append(grads, sg)
				s.Free(0, in)
				s.Free(0, unsharded)
				s.Free(0, saved[l])
				s.Free(0, g)
			}
		})
		s.Free(0, x0)
		s.Annotate(0, "Optimizer.step#AdamW.step", func() {
			if state == nil {
				for range c.layers {
					state = append(state, alloc("", shard, opt), alloc("", shard, opt))
				}
			}
		})
		s.Annotate(0, "Optimizer.zero_grad#AdamW.zero_grad", func() {
			for _, g := range grads {
				s.Free(0, g)
			}
			grads = nil
		})
	}
}

// TestShardedTrainingFixture: a rank of an FSDP run keeps its parameters'
// shards, and gathers a layer's whole weight for its forward and backward.
// What it gathers is parameter (never an activation, nor anything the
// batch scales) wherever FSDP's frames or its forward spans show it; with
// Python frames its reduce-scatter buffers and gradient shards are
// gradients, and the model facts count the shards (parameters and
// gradients: not what a module gathers, nor the reduce-scatter's input;
// AdamW's 2 states a parameter). No block of a run without FSDP is taken for FSDP's.
func TestShardedTrainingFixture(t *testing.T) {
	for _, kind := range frameKinds {
		for _, tc := range []struct {
			layers         int
			hidden, tokens int64
		}{{4, 1024, 2048}, {8, 512, 4096}, {3, 2048, 512}} {
			t.Run(fmt.Sprintf("%s, %d×%d, %d tokens", kind, tc.layers, tc.hidden, tc.tokens), func(t *testing.T) {
				c := fsdpRun{layers: tc.layers, hidden: tc.hidden, tokens: tc.tokens, steps: 3}
				x := fx{st.NewSim(), kind}
				c.run(x)
				snap := analysistest.Read(t, x.s, 0)
				h := history.Build(snap, snap.Device(0))
				python := kind == "module frames"
				var made []int // the blocks in allocation order
				for bi := range h.Blocks {
					if h.Blocks[bi].Alloc >= 0 {
						made = append(made, bi)
					}
				}
				slices.SortFunc(made, func(a, b int) int { return cmp.Compare(h.Blocks[a].Alloc, h.Blocks[b].Alloc) })
				if len(made) != len(c.kinds) {
					t.Fatalf("%d blocks allocated in the recording, the run made %d", len(made), len(c.kinds))
				}
				for k, bi := range made {
					b := &h.Blocks[bi]
					phase := h.Phases.At(int(b.Alloc))
					if c.kinds[k] == "gathered" && (python || phase == result.PhaseForward) {
						if b.Category != result.Parameter || b.Rule() != history.RuleShardedGathered {
							t.Errorf("a weight gathered in %s (%d B) is %s (%s)", phase, b.Requested, b.Category, b.Rule())
						}
						if p := whatif.PartOf(h, b, false, false); p != whatif.PartFixed {
							t.Errorf("a gathered weight in the what-if's part %d, want fixed", p)
						}
					}
					if c.kinds[k] == "reduce" && python && (b.Category != result.Gradient || b.Rule() != history.RuleShardedGradients) {
						t.Errorf("a reduce-scatter buffer of %d B is %s (%s)", b.Requested, b.Category, b.Rule())
					}
				}
				r := Analyze(snap, DefaultOptions())
				if python {
					m := r.WhatIf.Model
					if m.ParameterBytes != c.shardBytes || m.GradientBytes != c.shardBytes || !strings.HasPrefix(m.Optimizer, "2 states per parameter") {
						t.Errorf("model: parameters %d, gradients %d (want the shards' %d), optimizer %q", m.ParameterBytes, m.GradientBytes, c.shardBytes, m.Optimizer)
					}
				}
				for _, sg := range r.Suggestions {
					if sg.ID == "shard_states" && !strings.Contains(sg.Title, "twice as many") {
						t.Errorf("a sharded run told to shard: %s", sg.Title)
					}
				}
				// Out of room for its states in the next forward: what
				// shrinks them first, and among it more ranks, not sharding.
				s := x.s
				s.Annotate(0, "## forward ##", func() {
					s.Annotate(0, "FSDP::pre_forward (layers.0)", func() {
						s.Annotate(0, "FSDP::all_gather (layers.0)", func() {
							s.OOM(0, 2<<30, 256<<20, x.stack([]string{"at::native::empty_cuda(c10::ArrayRef<long>)"},
								[]*st.Dict{s.F("torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py", 225, "foreach_all_gather")}, nil))
						})
					})
				})
				r = Analyze(analysistest.Read(t, s, 0), DefaultOptions())
				if sg := suggestionIn(r, "shard_states"); len(r.Suggestions) == 0 || !suggest.ShrinksStates(r.Suggestions[0].ID) || sg == nil || !strings.Contains(sg.Title, "twice as many") {
					t.Errorf("at the OOM: suggestions %v, want what shrinks the states first, shard_states over twice the GPUs among them", suggestionIDs(r))
				}
				checkSavingsAreWhatIfs(t, r)
			})
		}
	}
	for _, kind := range frameKinds {
		for _, c := range []trainRun{{layers: 4, hidden: 1024, tokens: 2048, steps: 3}, {layers: 4, hidden: 1024, tokens: 2048, steps: 3, ddpCap: 25 << 20}} {
			x := fx{st.NewSim(), kind}
			c.run(x)
			snap := analysistest.Read(t, x.s, 0)
			h := history.Build(snap, snap.Device(0))
			for bi := range h.Blocks {
				switch r := h.Blocks[bi].Rule(); r {
				case history.RuleShardedGathered, history.RuleShardedParameters, history.RuleShardedGradients, history.RuleShardedMaster:
					t.Errorf("%s, DDP %v: a block of %d B taken for FSDP's (%s)", kind, c.ddpCap > 0, h.Blocks[bi].Requested, r)
				}
			}
		}
	}
}

// TestShardedTrainingTrace: the same FSDP2 rank in a profiler trace without
// Python stacks. The trace keeps FSDP's spans on both threads — forward's
// on the main thread, backward's on the autograd thread — so every weight
// gathered is parameter (gathered, fixed in the what-if) and every
// reduce-scatter buffer gradient; the activations stay activations.
func TestShardedTrainingTrace(t *testing.T) {
	const main, bw = 1, 2
	const weight, layers = 8 * mib, 4
	b := &traceBuilder{ta: layers * weight / 2} // the shards, allocated before the trace
	b.events = append(b.events, `{"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"thread 2 (pt_autograd_0)"}}`)
	kinds := map[uint64]string{}
	addr := uint64(0x7f0000000000)
	alloc := func(tid int, ts int64, n int64, kind string) uint64 {
		addr += 0x10000000
		kinds[addr] = kind
		b.mem(tid, ts, addr, n)
		return addr
	}
	gather := func(tid int, ts int64, l int) uint64 {
		b.span(fmt.Sprintf("FSDP::all_gather (layers.%d)", l), "user_annotation", tid, ts, 10)
		out := alloc(tid, ts+1, weight, "gathered")
		b.span(fmt.Sprintf("FSDP::all_gather_copy_out (layers.%d)", l), "user_annotation", tid, ts+20, 10)
		unsharded := alloc(tid, ts+21, weight, "gathered")
		b.mem(tid, ts+22, out, -weight)
		return unsharded
	}
	var grads []uint64
	for step := int64(1); step <= 3; step++ {
		t0 := step * 100000
		b.span(fmt.Sprintf("ProfilerStep#%d", step), "user_annotation", main, t0, 90000)
		b.span("## forward ##", "user_annotation", main, t0+1000, 20000)
		var saved []uint64
		for l := range layers {
			ts := t0 + 1100 + int64(l)*1000
			b.span(fmt.Sprintf("FSDP::pre_forward (layers.%d)", l), "user_annotation", main, ts, 100)
			unsharded := gather(main, ts+10, l)
			b.span("aten::mm", "cpu_op", main, ts+200, 100)
			saved = append(saved, alloc(main, ts+210, 4*mib, "activation"))
			b.span(fmt.Sprintf("FSDP::post_forward (layers.%d)", l), "user_annotation", main, ts+400, 100)
			b.mem(main, ts+410, unsharded, -weight)
		}
		for l := layers - 1; l >= 0; l-- {
			ts := t0 + 30000 + int64(layers-1-l)*2000
			b.span(fmt.Sprintf("FSDP::pre_backward (layers.%d)", l), "user_annotation", bw, ts, 100)
			unsharded := gather(bw, ts+10, l)
			b.span("autograd::engine::evaluate_function: MmBackward0", "cpu_op", bw, ts+200, 300)
			g := alloc(bw, ts+210, 4*mib, "")
			gw := alloc(bw, ts+220, weight, "")
			b.span(fmt.Sprintf("FSDP::post_backward_reduce (layers.%d)", l), "user_annotation", bw, ts+600, 300)
			in := alloc(bw, ts+610, weight, "reduce")
			b.mem(bw, ts+620, gw, -weight)
			grads = append(grads, alloc(bw, ts+630, weight/2, "reduce"))
			b.mem(bw, ts+640, in, -weight)
			b.mem(bw, ts+1000, unsharded, -weight)
			b.mem(bw, ts+1010, saved[l], -4*mib)
			b.mem(bw, ts+1020, g, -4*mib)
		}
		b.span("Optimizer.step#AdamW.step", "user_annotation", main, t0+60000, 1000)
		if step == 1 {
			for range 2 * layers {
				alloc(main, t0+60100, weight/2, "")
			}
		}
		b.span("Optimizer.zero_grad#AdamW.zero_grad", "user_annotation", main, t0+70000, 100)
		for _, g := range grads {
			b.mem(main, t0+70010, g, -weight/2)
		}
		grads = nil
	}
	snap := analysistest.ReadJSON(t, []byte(`{"schemaVersion":1,"traceEvents":[`+strings.Join(b.events, ",\n")+`]}`))
	h := history.Build(snap, snap.Devices[0])
	seen := map[string]int{}
	for bi := range h.Blocks {
		bl := &h.Blocks[bi]
		kind, ok := kinds[bl.Addr]
		if !ok || bl.Alloc < 0 {
			continue
		}
		seen[kind]++
		switch {
		case kind == "gathered" && (bl.Category != result.Parameter || bl.Rule() != history.RuleShardedGathered || whatif.PartOf(h, bl, false, false) != whatif.PartFixed):
			t.Errorf("a gathered weight (%d B, %s) is %s (%s)", bl.Requested, h.Phases.At(int(bl.Alloc)), bl.Category, bl.Rule())
		case kind == "reduce" && (bl.Category != result.Gradient || bl.Rule() != history.RuleShardedGradients):
			t.Errorf("a reduce-scatter buffer (%d B) is %s (%s)", bl.Requested, bl.Category, bl.Rule())
		case kind == "activation" && bl.Category != result.Activation:
			t.Errorf("an activation is %s (%s)", bl.Category, bl.Rule())
		}
	}
	if want := 3 * layers * 4; seen["gathered"] != want || seen["reduce"] != 3*layers*2 {
		t.Errorf("blocks seen %v, want %d gathered, %d reduce", seen, want, 3*layers*2)
	}
}
