package snapshottest

import (
	"fmt"
	"strings"
)

// StackKind says what the recorded stacks of a leak scenario hold: real
// programs record different ones, and step detection must hold for all.
type StackKind int

// Kinds of stacks.
const (
	// StacksModule: Python frames with the nn.Module calls
	// (torch/nn/modules/module.py _call_impl), as
	// _record_memory_history() records them.
	StacksModule StackKind = iota
	// StacksUser: only the user's own files (the model's forward frames,
	// the script), no PyTorch or library frames.
	StacksUser
	// StacksCpp: C++ frames only (the allocator, the op's kernel, the
	// dispatcher; the autograd engine in backward), no Python frames.
	StacksCpp
	// StacksNone: no frames at all.
	StacksNone
	// StacksUserCpp: the user's own Python files and the C++ frames
	// (stacks="all" where only the user's Python frames were kept): the
	// shape of a real 12-layer autocast benchmark.
	StacksUserCpp
)

// String names the kind, for test names.
func (k StackKind) String() string {
	switch k {
	case StacksModule:
		return "module frames"
	case StacksUser:
		return "user frames only"
	case StacksCpp:
		return "C++ frames only"
	case StacksUserCpp:
		return "user and C++ frames"
	}
	return "no frames"
}

// stack turns the Python frames of an allocation (innermost first) into
// the stack the scenario's kind records: as is, without library frames,
// C++ frames of op instead, or none.
func (m *leakModel) stack(op string, frames ...*Dict) *List {
	s := m.s
	if m.c.Functional {
		frames = m.functional(frames)
	}
	switch m.c.Stacks {
	case StacksUser, StacksUserCpp:
		var keep []*Dict
		if m.c.Stacks == StacksUserCpp {
			keep = m.cpp(op)
		}
		for _, f := range frames {
			file := f.Vals[0].(string)
			if !strings.HasPrefix(file, "torch/") && !strings.Contains(file, "/site-packages/") {
				keep = append(keep, f)
			}
		}
		return s.Stack(keep...)
	case StacksCpp:
		return s.Stack(m.cpp(op)...)
	case StacksNone:
		return nil
	}
	return s.Stack(frames...)
}

// cpp returns the C++ frames of an allocation made by op ("addmm",
// "layer_norm", "cached_cast" for autocast's cast of a weight, "backward:
// MmBackward0" in the autograd engine), innermost first.
func (m *leakModel) cpp(op string) []*Dict {
	s := m.s
	fr := []*Dict{
		s.F("CUDACachingAllocator.cpp", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, unsigned long, CUstream_st*)"),
		s.F("", 0, "at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)"),
	}
	if node, ok := strings.CutPrefix(op, "backward: "); ok {
		return append(fr,
			s.F("", 0, fmt.Sprintf("torch::autograd::generated::%s::apply(std::vector<at::Tensor>&&)", node)),
			s.F("", 0, "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*)"),
			s.F("", 0, "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"),
			s.F("", 0, "torch::autograd::Engine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)"))
	}
	if op == "cached_cast" {
		fr = append(fr,
			s.F("", 0, "at::native::_to_copy(at::Tensor const&, std::optional<c10::ScalarType>)"),
			s.F("", 0, "at::autocast::cached_cast(c10::ScalarType, at::Tensor const&, c10::DeviceType)"))
		op = "linear"
	}
	return append(fr,
		s.F("", 0, fmt.Sprintf("at::native::%s(at::Tensor const&)", op)),
		s.F("", 0, fmt.Sprintf("at::_ops::%s::call(at::Tensor const&)", op)),
		s.F("", 0, fmt.Sprintf("torch::autograd::THPVariable_%s(_object*, _object*, _object*)", op)))
}

// Library frames of the framework scenarios: a hydra entry point running a
// Lightning-style prediction loop (site-packages paths, as installed).
const sitePackages = "/opt/conda/lib/python3.11/site-packages/"

// frameworkOuter returns the frames outside the user's predict_step, for
// an allocation of the iteration at prediction_loop.py line (250: the batch
// moved to the device; 264: the step hook that calls predict_step),
// innermost first.
func (m *leakModel) frameworkOuter(line int) []*Dict {
	s := m.s
	lp := sitePackages + "lightning/pytorch/"
	hy := sitePackages + "hydra/"
	fr := []*Dict{}
	if line == 264 {
		fr = append(fr, s.F(lp+"strategies/strategy.py", 438, "predict_step"), s.F(lp+"trainer/call.py", 323, "_call_strategy_hook"))
	}
	return append(fr,
		s.F(lp+"loops/prediction_loop.py", line, "_predict_step"),
		s.F(lp+"loops/prediction_loop.py", 124, "run"),
		s.F(lp+"loops/utilities.py", 179, "_decorator"),
		s.F(lp+"trainer/trainer.py", 1024, "_run_stage"),
		s.F(lp+"trainer/trainer.py", 981, "_run"),
		s.F(lp+"trainer/trainer.py", 907, "_predict_impl"),
		s.F(lp+"trainer/call.py", 47, "_call_and_handle_interrupt"),
		s.F(lp+"trainer/trainer.py", 866, "predict"),
		s.F("run.py", 22, "main"),
		s.F(hy+"core/utils.py", 186, "run_job"),
		s.F(hy+"_internal/hydra.py", 119, "run"),
		s.F(hy+"_internal/utils.py", 458, "<lambda>"),
		s.F(hy+"_internal/utils.py", 220, "run_and_report"),
		s.F(hy+"_internal/utils.py", 457, "_run_app"),
		s.F(hy+"_internal/utils.py", 394, "_run_hydra"),
		s.F(hy+"main.py", 94, "decorated_main"),
		s.F("run.py", 30, "<module>"))
}

// outer returns the frames outside the model for code at line of the
// loop body (the script's loop function, or the user's predict_step under
// the framework), innermost first.
func (m *leakModel) outer(line int) []*Dict {
	s := m.s
	if m.c.Framework {
		return append([]*Dict{s.F("lit_module.py", line, "predict_step")}, m.frameworkOuter(264)...)
	}
	fr := []*Dict{s.F(m.script, line, m.fn)}
	if m.fn != "<module>" {
		fr = append(fr, s.F(m.script, 60, "<module>"))
	}
	return fr
}

// dataStack is the stack of the batch moved to the device at line of the
// loop body (under the framework, by the loop itself).
func (m *leakModel) dataStack(line int) *List {
	s := m.s
	if m.c.Framework {
		lp := sitePackages + "lightning/"
		fr := append([]*Dict{s.F(lp+"fabric/utilities/apply_func.py", 104, "batch_to"),
			s.F(sitePackages+"lightning_utilities/core/apply_func.py", 64, "apply_to_collection"),
			s.F(lp+"fabric/utilities/apply_func.py", 110, "move_data_to_device"),
			s.F(lp+"pytorch/strategies/strategy.py", 270, "batch_to_device")}, m.frameworkOuter(250)...)
		return m.stack("_to_copy", fr...)
	}
	return m.stack("_to_copy", m.outer(line)...)
}
