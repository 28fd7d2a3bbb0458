package analysis

import (
	"cmp"
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/analysis/whatif"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// Fixtures of the patterns real programs produce, each run with the stacks
// real recordings hold: Python frames with PyTorch's module calls, the
// user's files only, C++ frames only (stacks="all" without Python frames),
// no frames at all.

// frameKinds are the stack shapes each fixture is recorded with.
var frameKinds = []string{"module frames", "user frames", "C++ frames", "no frames"}

// fx records a fixture with one stack shape.
type fx struct {
	s    *st.Sim
	kind string
}

// stack builds the stack the fixture's shape records for an allocation:
// cpp are the C++ frames of the op (innermost first), torch PyTorch's and
// libraries' Python frames, user the user's own.
func (x fx) stack(cpp []string, torch, user []*st.Dict) *st.List {
	var fs []*st.Dict
	switch x.kind {
	case "module frames":
		fs = append(append(fs, torch...), user...)
	case "user frames":
		fs = append(fs, user...)
	case "C++ frames":
		for _, n := range cpp {
			fs = append(fs, x.s.F("", 0, n))
		}
	default:
		return nil
	}
	return x.s.Stack(fs...)
}

// The C++ frames of a few ops, innermost first (the allocator's and the
// dispatcher's plumbing left out).
var (
	cppAddmm     = []string{"at::native::structured_addmm_out_cuda::impl(at::Tensor const&, at::Tensor const&, at::Tensor const&)", "at::_ops::addmm::call(at::Tensor const&, at::Tensor const&, at::Tensor const&)", "torch::autograd::THPVariable_linear(_object*, _object*, _object*)"}
	cppWorkspace = append([]string{"at::cuda::getNewWorkspace()", "at::cuda::getCurrentCUDABlasHandle()"}, cppAddmm...)
	cppMmBwd     = []string{"at::native::structured_mm_out_cuda::impl(at::Tensor const&, at::Tensor const&, at::Tensor const&)", "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)", "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*)", "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"}
	cppAdam      = []string{"at::native::zeros_like(at::Tensor const&)", "torch::autograd::THPVariable_zeros_like(_object*, _object*, _object*)"}
)

// trainRun records a small training script: weights made before the
// recording, then steps of forward (annotated), backward (the autograd
// thread: no Python frames), AdamW's step and zero_grad(set_to_none=True).
// The first matmul of the main thread and of the autograd thread each take
// a cuBLAS workspace of ws bytes and keep it (Hopper: 32 MiB, and
// cuBLASLt's 1 MiB after it); every gradient is freed by zero_grad.
type trainRun struct {
	layers      int
	hidden      int64
	tokens      int64
	steps       int
	ws          int64  // cuBLAS workspace size (0: none in the recording)
	lt          bool   // cuBLASLt's 1 MiB workspace after the main thread's
	inference   bool   // forward only, under no_grad: no backward, no optimizer
	frozen      int    // frozen weights (no gradient, no state) of hidden² fp32 each, made before the trained ones
	frozenSize  int64  // bytes of each frozen weight (0: 4·hidden²)
	untraced    bool   // the weights carry no stack (the recording began after the model was built)
	modelLib    string // a library's modeling file the layers run in (module frames only; "": none)
	ema         bool   // an EMA's shadow weights: one copy of each weight, made outside the phases before the first step and kept
	ddpCap      int64  // > 0: the model is wrapped in DistributedDataParallel with this bucket cap (ddpConstruct, ddpRebuild)
	bucketView  bool   // with ddpCap: gradient_as_bucket_view=True, each gradient copied into its bucket and freed as backward makes it
	accum       int    // > 1: gradient accumulation, the optimizer's step and zero_grad every accum micro-batches (steps counts micro-batches)
	lateZero    bool   // zero_grad after the next forward instead of after the optimizer's step
	weightBytes int64  // set by run: the weights' requested bytes

	ddpBuckets []ddpBucket // set by run: DDP's buckets in allocation order
}

func (c *trainRun) run(x fx) {
	s := x.s
	h := c.hidden
	user := func(line int, name string) *st.Dict { return s.F("train.py", line, name) }
	model := func(l int) *st.Dict { return s.F("model.py", 40+l, "forward") }
	call := s.F("torch/nn/modules/module.py", 1787, "_call_impl")
	linear := s.F("torch/nn/modules/linear.py", 125, "forward")
	initSt := x.stack([]string{"at::native::empty_cuda(c10::ArrayRef<long>)"}, []*st.Dict{s.F("torch/nn/modules/linear.py", 106, "__init__")}, []*st.Dict{s.F("model.py", 31, "__init__"), user(10, "<module>")})
	if c.untraced {
		initSt = nil
	}
	s.NoTrace = true
	for range c.frozen {
		s.Alloc(0, cmp.Or(c.frozenSize, 4*h*h), initSt)
	}
	var weights []int64
	for l := 0; l < c.layers; l++ {
		s.Alloc(0, h*h*4, initSt)
		weights = append(weights, h*h*4)
		c.weightBytes += h * h * 4
	}
	s.NoTrace = false
	if c.ddpCap > 0 {
		c.ddpConstruct(x, weights)
	}
	if c.ema {
		emaSt := x.stack([]string{"at::native::clone(at::Tensor const&, std::optional<c10::MemoryFormat>)"}, []*st.Dict{s.F("torch/_tensor.py", 60, "clone")}, []*st.Dict{s.F("ema.py", 12, "<listcomp>"), user(15, "<module>")})
		for _, w := range weights {
			s.Alloc(0, w, emaSt)
		}
	}
	var grads, state []uint64
	zeroGrad := func() {
		s.Annotate(0, "Optimizer.zero_grad#AdamW.zero_grad", func() {
			for _, g := range grads {
				s.Free(0, g)
			}
			grads = nil
		})
	}
	firstFwd, firstBwd := true, true
	for step := 0; step < c.steps; step++ {
		x0 := s.Alloc(0, c.tokens*8, x.stack([]string{"at::native::randint(long, c10::ArrayRef<long>)"}, nil, []*st.Dict{user(20, "<module>")}))
		var saved []uint64
		s.Annotate(0, "## forward ##", func() {
			if c.ddpCap > 0 && step == 1 {
				c.ddpRebuild(x, weights)
			}
			for l := 0; l < c.layers; l++ {
				lib := []*st.Dict{linear, call}
				if c.modelLib != "" {
					lib = append(lib, s.F(c.modelLib, 300, "forward"))
				}
				fwd := x.stack(cppAddmm, lib, []*st.Dict{model(l), user(21, "<module>")})
				saved = append(saved, s.Alloc(0, c.tokens*h*4, fwd))
				if firstFwd && c.ws > 0 {
					wsStack := fwd
					if x.kind == "C++ frames" {
						wsStack = x.stack(cppWorkspace, nil, nil)
					}
					s.Alloc(0, c.ws, wsStack)
					if c.lt {
						s.Alloc(0, 1<<20, wsStack)
					}
				}
				firstFwd = false
			}
		})
		if c.lateZero {
			zeroGrad()
		}
		if c.inference {
			for _, a := range saved {
				s.Free(0, a)
			}
			s.Free(0, x0)
			continue
		}
		s.Annotate(0, "backward", func() {
			bwd := x.stack(cppMmBwd, nil, nil) // the autograd thread: no Python frames
			for l := c.layers - 1; l >= 0; l-- {
				g := s.Alloc(0, c.tokens*h*4, bwd) // the input's gradient
				if firstBwd && c.ws > 0 {
					wsStack := bwd
					if x.kind == "C++ frames" {
						wsStack = x.stack(append([]string{"at::cuda::getNewWorkspace()", "at::cuda::getCurrentCUDABlasHandle()"}, cppMmBwd...), nil, nil)
					}
					s.Alloc(0, c.ws, wsStack)
					firstBwd = false
				}
				if gw := s.Alloc(0, weights[l], bwd); c.ddpCap > 0 && c.bucketView || len(grads) == c.layers {
					// the Reducer's hook copied it into its bucket and made
					// .grad a view of the bucket; or AccumulateGrad added it
					// to the .grad an earlier micro-batch made
					s.Free(0, gw)
				} else {
					grads = append(grads, gw)
				}
				s.Free(0, g)
				s.Free(0, saved[l])
			}
		})
		s.Free(0, x0)
		if c.accum > 1 && (step+1)%c.accum != 0 {
			continue
		}
		s.Annotate(0, "Optimizer.step#AdamW.step", func() {
			if state == nil {
				opt := x.stack(cppAdam, []*st.Dict{s.F("torch/optim/adamw.py", 180, "_init_group"), s.F("torch/optim/adamw.py", 230, "step")}, []*st.Dict{user(23, "<module>")})
				for _, w := range weights {
					state = append(state, s.Alloc(0, w, opt), s.Alloc(0, w, opt))
				}
			}
		})
		if !c.lateZero {
			zeroGrad()
		}
	}
}

// TestWorkspacesFixture: the cuBLAS workspaces of the main and the autograd
// thread — 32 MiB on Hopper (with cuBLASLt's 1 MiB), 8,519,680 B before —
// are workspace whatever the stacks: never activation or gradient (no
// gradient is left at the end: zero_grad frees them all), and no
// suggestion is about gradients or smaller batches for them.
func TestWorkspacesFixture(t *testing.T) {
	for _, kind := range frameKinds {
		for _, c := range []trainRun{
			{layers: 2, hidden: 512, tokens: 1024, steps: 3, ws: 32 << 20, lt: true},
			{layers: 6, hidden: 256, tokens: 4096, steps: 2, ws: history.CublasWorkspaceSize},
			{layers: 3, hidden: 1024, tokens: 512, steps: 4, ws: 32 << 20, lt: true, inference: true},
		} {
			t.Run(fmt.Sprintf("%s, %d layers, workspace %d, inference %v", kind, c.layers, c.ws, c.inference), func(t *testing.T) {
				x := fx{st.NewSim(), kind}
				c.run(x)
				snap := analysistest.Read(t, x.s, 0)
				r := Analyze(snap, DefaultOptions())
				d := r.Devices[0]
				want := 2 * c.ws
				if c.inference {
					want = c.ws
				}
				if c.lt {
					want += 1 << 20
				}
				if got := d.AtEnd.Categories[result.Workspace]; got != want {
					t.Errorf("workspace at the end %d, want %d (%v)", got, want, d.AtEnd.Categories)
				}
				if g := d.AtEnd.Categories[result.Gradient]; g != 0 {
					t.Errorf("%d B of gradients at the end: zero_grad freed them all", g)
				}
				if a := d.AtEnd.Categories[result.Activation] + d.AtEnd.Categories[result.Unknown]; a != 0 {
					t.Errorf("%d B of activations or unknown at the end: only weights, state and workspaces live", a)
				}
				for _, sg := range r.Suggestions {
					if sg.ID == "set_to_none" || sg.ID == "reduce_batch_size" {
						t.Errorf("suggestion %s: %s", sg.ID, sg.Because)
					}
				}
			})
		}
	}
}

// TestAutocastModelFacts: the fp32 run and the bf16-autocast run of one
// model give the same parameter count and optimizer ratio — autocast's
// copies are never parameters — in every stack shape; wherever frames show
// the ops (C++ frames: autocast's casts; Python frames only: the ops' first
// allocations, autocast shown by backward casting the copies' gradients to
// fp32) every copy of every step is autocast_cache, and no copy is ∝ batch
// or seq in the what-if. The fp32 run has no copy.
func TestAutocastModelFacts(t *testing.T) {
	for _, stacks := range []st.StackKind{st.StacksModule, st.StacksUser, st.StacksUserCpp, st.StacksCpp, st.StacksNone} {
		for _, layers := range []int{2, 6} {
			t.Run(fmt.Sprintf("%s, %d layers", stacks, layers), func(t *testing.T) {
				c := st.DefaultLeakConfig
				c.Layers, c.Stacks, c.Steps = layers, stacks, 4
				var models [2]result.InferredModel
				for i, autocast := range []bool{false, true} {
					c.Autocast = autocast
					s := analysistest.Read(t, st.TrainLoopHealthy(c), 0)
					r := Analyze(s, DefaultOptions())
					if r.WhatIf == nil {
						t.Fatal("no what-if")
					}
					models[i] = r.WhatIf.Model
					h := history.Build(s, s.Device(0))
					var copies int64
					for bi := range h.Blocks {
						b := &h.Blocks[bi]
						if b.Category == result.AutocastCache {
							copies += b.Size
							if p := whatif.PartOf(h, b, false, false); p == whatif.PartQuad || p == whatif.PartLinear || p == whatif.PartQuadRest || p == whatif.PartLinearRest {
								t.Errorf("autocast copy %d B in the what-if's part %d", b.Size, p)
							}
						}
					}
					// Without frames nothing tells a copy from an
					// activation of half a weight's size.
					want := int64(c.Steps) * c.CacheBytes()
					if !autocast || stacks == st.StacksNone {
						want = 0
					}
					if autocast && copies != want {
						t.Errorf("%d B of autocast copies over %d steps, want %d", copies, c.Steps, want)
					}
					if !autocast && copies != 0 {
						t.Errorf("fp32: %d B of autocast copies", copies)
					}
				}
				if models[0].ParameterCount != models[1].ParameterCount || models[0].StatePerParameterByte != models[1].StatePerParameterByte {
					t.Errorf("fp32 %d parameters, ratio %v; autocast %d, %v", models[0].ParameterCount, models[0].StatePerParameterByte,
						models[1].ParameterCount, models[1].StatePerParameterByte)
				}
			})
		}
	}
}

// TestGradientsMovedWithModel: Module.to() after a step copies each
// parameter and, right after it at another line of _apply, its .grad: those
// are gradients, with the fix "drop the gradients before moving" (its
// saving the what-if's) — not parameters that earn a quantization. The
// buffers moved after the parameters stay parameters. Only module.py's
// _apply frames tell a gradient from its parameter: with the user's frames,
// C++ frames or none, every block stays a parameter.
func TestGradientsMovedWithModel(t *testing.T) {
	for _, kind := range frameKinds {
		for _, layers := range []int{2, 8} {
			t.Run(fmt.Sprintf("%s, %d layers", kind, layers), func(t *testing.T) {
				x := fx{st.NewSim(), kind}
				s := x.s
				apply := func(line int) *st.List {
					return x.stack([]string{"at::native::_to_copy(at::Tensor const&)", "torch::autograd::THPVariable_to(_object*, _object*, _object*)"},
						[]*st.Dict{s.F("torch/nn/modules/module.py", 1341, "convert"), s.F("torch/nn/modules/module.py", line, "_apply"),
							s.F("torch/nn/modules/module.py", 915, "_apply"), s.F("torch/nn/modules/module.py", 1355, "to")},
						[]*st.Dict{s.F("train.py", 60, "<module>")})
				}
				var params, grads int64
				for l := 0; l < layers; l++ {
					w, b := int64(1024*(l+1)*4096), int64(4096*(l+1))
					for _, n := range []int64{w, b} {
						s.Alloc(0, n, apply(942)) // param_applied = fn(param)
						s.Alloc(0, n, apply(958)) // grad_applied = fn(param.grad)
						params += n
						grads += n
					}
					s.Alloc(0, int64(4096*(l+1)), apply(963)) // running statistics: buffers
					s.Alloc(0, int64(4096*(l+1)), apply(963))
					params += 2 * 4096 * int64(l+1)
				}
				snap := analysistest.Read(t, s, 0)
				r := Analyze(snap, DefaultOptions())
				end := r.Devices[0].AtEnd.Categories
				var sg *result.Suggestion
				for i := range r.Suggestions {
					if r.Suggestions[i].ID == "drop_grads_before_move" {
						sg = &r.Suggestions[i]
					}
					if id := r.Suggestions[i].ID; id == "quantize_weights" && kind == "module frames" {
						t.Errorf("suggestion %s for moved gradients", id)
					}
				}
				if kind != "module frames" {
					if end[result.Gradient] != 0 || sg != nil {
						t.Errorf("%d B gradients, suggestion %v: nothing tells them apart", end[result.Gradient], sg)
					}
					return
				}
				if got := requestedAtEndOf(history.Build(snap, snap.Device(0))); got[result.Gradient] != grads || got[result.Parameter] != params {
					t.Errorf("gradient %d, parameter %d requested; want %d, %d", got[result.Gradient], got[result.Parameter], grads, params)
				}
				if sg == nil || sg.EstimatedSavingsBytes != end[result.Gradient] {
					t.Fatalf("suggestion %+v, want drop_grads_before_move saving %d", sg, end[result.Gradient])
				}
				for _, p := range r.WhatIf.Suggestions {
					if p.ID == sg.ID && p.SavingBytes != sg.EstimatedSavingsBytes {
						t.Errorf("what-if saves %d, the suggestion %d", p.SavingBytes, sg.EstimatedSavingsBytes)
					}
				}
			})
		}
	}
}

// requestedAtEndOf is requestedAtEnd's requested bytes.
func requestedAtEndOf(h *history.History) result.Categories {
	c, _ := requestedAtEnd(h)
	return c
}
