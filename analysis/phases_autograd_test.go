package analysis

import (
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// TestAutogradCallInForward varies nesta's shape (TestPhasesWithoutBackward):
// training steps whose model calls the autograd engine inside its forward —
// a gradient penalty through torch.autograd.grad, a jvp through
// torch.autograd.functional, a vjp through torch.func — and then runs its
// real loss.backward(). The engine's work inside forward is forward; the
// real backward stays backward, one per step. The engine's allocations
// carry no frames (stacks="python": the engine runs on its own thread) or
// only its C++ frames (stacks="all"); the model's frames go through
// nn.Module or are the user's files only.
//
// When the call is the last thing forward does and nothing else is
// allocated between the steps (no loss tensor, an optimizer without
// state), nothing tells the engine's work inside forward from the backward
// that follows; the real backward must still stay backward, although the
// next step's forward follows it in the same call of the model.
func TestAutogradCallInForward(t *testing.T) {
	type entry struct {
		name   string
		frames func(s *st.Sim) []*st.Dict // the call's frames, innermost first
	}
	entries := []entry{
		{"torch.autograd.grad", func(s *st.Sim) []*st.Dict {
			return []*st.Dict{s.F("torch/autograd/__init__.py", 220, "_make_grads"), s.F("torch/autograd/__init__.py", 411, "grad")}
		}},
		{"torch.autograd.functional.jvp", func(s *st.Sim) []*st.Dict {
			return []*st.Dict{s.F("torch/autograd/functional.py", 486, "<genexpr>"), s.F("torch/autograd/functional.py", 486, "jvp")}
		}},
		{"torch.func.vjp", func(s *st.Sim) []*st.Dict {
			return []*st.Dict{s.F("torch/_functorch/eager_transforms.py", 120, "_autograd_grad"),
				s.F("torch/_functorch/eager_transforms.py", 410, "_vjp_with_argnums"), s.F("torch/_functorch/apis.py", 201, "vjp")}
		}},
	}
	for _, e := range entries {
		for _, cpp := range []bool{false, true} {
			for _, module := range []bool{true, false} {
				for _, steps := range []int{2, 3} {
					for _, last := range []bool{false, true} {
						name := fmt.Sprintf("%s/cpp=%v/module=%v/%d steps/last=%v", e.name, cpp, module, steps, last)
						t.Run(name, func(t *testing.T) { checkAutogradInForward(t, e.frames, cpp, module, steps, last) })
					}
				}
			}
		}
	}
}

// checkAutogradInForward simulates the run of TestAutogradCallInForward and
// checks its phases.
func checkAutogradInForward(t *testing.T, call func(*st.Sim) []*st.Dict, cpp, module bool, steps int, last bool) {
	s := st.NewSim()
	loop := s.F("train.py", 40, "<module>")
	outer := []*st.Dict{loop}
	if module {
		outer = []*st.Dict{s.F("torch/nn/modules/module.py", 1750, "_call_impl"), loop}
	}
	stack := func(inner ...*st.Dict) *st.List { return s.Stack(append(inner, outer...)...) }
	fwd := stack(s.F("model.py", 93, "forward"))
	fwdAfter := stack(s.F("model.py", 98, "forward"))
	penalty := stack(append(call(s), s.F("model.py", 70, "gradient_penalty"), s.F("model.py", 96, "forward"))...)
	var engine *st.List
	if cpp {
		engine = s.Stack(
			s.F("", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, unsigned long, CUstream_st*)"),
			s.F("", 0, "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)"),
			s.F("", 0, "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*)"),
			s.F("", 0, "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"))
	}
	loss := s.Stack(s.F("train.py", 42, "<module>"))
	seed := s.Stack(s.F("torch/autograd/__init__.py", 220, "_make_grads"), s.F("torch/_tensor.py", 626, "backward"), s.F("train.py", 43, "<module>"))
	opt := s.Stack(s.F("torch/optim/adamw.py", 300, "_single_tensor_adamw"), s.F("torch/optim/optimizer.py", 493, "wrapper"), s.F("train.py", 44, "<module>"))

	var inForward, inBackward [][2]int // event ranges, first and last
	var grads []uint64
	for step := 0; step < steps; step++ {
		a1 := s.Alloc(0, 8*mib, fwd)
		// the call inside forward: its own tensor, then the engine's work
		first := analysistest.TraceLen(s)
		p := s.Alloc(0, 2*mib, penalty)
		for k := 0; k < 3; k++ {
			g := s.Alloc(0, 3*mib, engine)
			w := s.Alloc(0, 1*mib, engine)
			s.Free(0, w)
			if k < 2 {
				s.Free(0, g)
			}
		}
		inForward = append(inForward, [2]int{first, analysistest.TraceLen(s) - 1})
		var a2, l uint64
		if !last {
			a2 = s.Alloc(0, 6*mib, fwdAfter)
			l = s.Alloc(0, 512, loss)
		}
		// the real backward
		first = analysistest.TraceLen(s)
		sd := s.Alloc(0, 512, seed)
		s.Free(0, sd)
		for _, g := range grads {
			s.Free(0, g)
		}
		grads = grads[:0]
		for k := 0; k < 4; k++ {
			grads = append(grads, s.Alloc(0, 4*mib, engine))
			sc := s.Alloc(0, 5*mib, engine)
			s.Free(0, sc)
		}
		s.Free(0, p)
		if !last {
			s.Free(0, a2)
		}
		s.Free(0, a1)
		inBackward = append(inBackward, [2]int{first, analysistest.TraceLen(s) - 1})
		if !last {
			s.Annotate(0, "Optimizer.step#AdamW.step", func() {
				for range 4 {
					x := s.Alloc(0, 1*mib, opt)
					s.Free(0, x)
				}
			})
			s.Free(0, l)
		}
	}
	snap := analysistest.Read(t, s, 0)
	h := history.Build(snap, snap.Devices[0])
	for _, r := range inForward {
		if last {
			break
		}
		for i := r[0]; i <= r[1]; i++ {
			if ph := h.Phases.At(i); ph != result.PhaseForward {
				t.Fatalf("event %d (the autograd call inside forward, %d–%d) is %s", i, r[0], r[1], ph)
			}
		}
	}
	for _, r := range inBackward {
		// the seed is allocated and freed under loss.backward(); what
		// follows is the engine's work for it
		for i := r[0]; i <= r[1]; i++ {
			if ph := h.Phases.At(i); ph != result.PhaseBackward {
				t.Fatalf("event %d (loss.backward(), %d–%d) is %s", i, r[0], r[1], ph)
			}
		}
	}
	backward := 0
	for _, sp := range h.Phases.Spans {
		if sp.Phase == result.PhaseBackward {
			backward++
		}
	}
	if backward != steps {
		t.Errorf("%d backward spans, want one per step (%d)", backward, steps)
	}
}
