package snapshottest

import "fmt"

// Scenario parameters for a small GPT-style training run.
type TrainConfig struct {
	Layers     int   // transformer blocks
	Hidden     int64 // hidden size
	Seq        int64 // sequence length
	Batch      int64 // micro-batch size
	Heads      int64
	Steps      int   // training steps to simulate
	BigStep    int   // 0: none; else the step that gets a bigger batch
	BigBatch   int64 // batch size of that step
	Capacity   int64 // device memory: an allocation that does not fit is an OOM (0: never)
	NoBwdStack bool  // backward allocations without Python frames (the real default)
}

// DemoConfig is the run `make demo` shows: a 12-layer model whose second step
// gets a larger batch and dies in the attention of the forward pass.
var DemoConfig = TrainConfig{Layers: 12, Hidden: 1024, Seq: 1024, Batch: 4, Heads: 16, Steps: 2, BigStep: 2, BigBatch: 24, Capacity: 20 << 30, NoBwdStack: true}

// Train simulates a training run with AdamW, as a user script would record
// it: the model is built before _record_memory_history (its parameters have
// no trace), each step runs zero_grad, forward (activations saved for
// backward, attention scores of size batch·heads·seq²), backward (gradients,
// C++-only frames), and Optimizer.step (AdamW state created at the first step).
func Train(c TrainConfig) *Sim {
	s := NewSim()
	fp := 4 // float32 bytes
	train := s.F("train.py", 88, "<module>")
	call := s.F("torch/nn/modules/module.py", 1787, "_call_impl")
	wrapped := s.F("torch/nn/modules/module.py", 1776, "_wrapped_call_impl")
	build := s.Stack(s.F("torch/nn/modules/linear.py", 106, "__init__"), s.F("model.py", 31, "__init__"), s.F("train.py", 52, "<module>"))
	// Parameters, before recording began: attention (4·h²) and MLP (8·h²) per layer.
	s.NoTrace = true
	var params []int64
	var paramAddrs []uint64
	for l := 0; l < c.Layers; l++ {
		for _, n := range []int64{3 * c.Hidden * c.Hidden, c.Hidden * c.Hidden, 4 * c.Hidden * c.Hidden, 4 * c.Hidden * c.Hidden} {
			params = append(params, n*int64(fp))
			paramAddrs = append(paramAddrs, s.Alloc(0, n*int64(fp), build))
		}
	}
	s.NoTrace = false
	var grads, state []uint64
	for step := 1; step <= c.Steps; step++ {
		batch := c.Batch
		if step == c.BigStep {
			batch = c.BigBatch
		}
		tokens := batch * c.Seq
		s.Annotate(0, "Optimizer.zero_grad#AdamW.zero_grad", func() {
			for _, g := range grads {
				s.Free(0, g)
			}
			grads = nil
		})
		data := s.Stack(s.F("train.py", 90, "<module>"))
		x := s.Alloc(0, tokens*8, data) // token ids (int64)
		var saved []uint64
		for l := 0; l < c.Layers; l++ {
			fwd := func(line int, name string) *List {
				return s.Stack(s.F("model.py", line, name), call, wrapped, s.F("model.py", 140, "forward"), call, wrapped, train)
			}
			saved = append(saved, s.Alloc(0, tokens*c.Hidden*int64(fp), fwd(60, "forward")))   // layer norm out
			saved = append(saved, s.Alloc(0, 3*tokens*c.Hidden*int64(fp), fwd(62, "forward"))) // qkv
			scores := batch * c.Heads * c.Seq * c.Seq * int64(fp)
			if c.Capacity > 0 && s.Reserved(0)+scores > c.Capacity {
				// The allocator frees its cache and retries before failing.
				s.EmptyCache(0)
			}
			if c.Capacity > 0 && s.Reserved(0)+scores > c.Capacity {
				s.Tick(50)
				free := max(c.Capacity-s.Reserved(0), 0)
				s.OOM(0, scores, free, fwd(64, "attention"))
				for i := len(saved) - 1; i >= 0; i-- { // the exception unwinds the graph
					s.Free(0, saved[i])
				}
				s.Free(0, x)
				return s
			}
			saved = append(saved, s.Alloc(0, scores, fwd(64, "attention")))                  // softmax(qk^T)
			tmp := s.Alloc(0, tokens*c.Hidden*int64(fp), fwd(65, "attention"))               // temporary
			saved = append(saved, s.Alloc(0, tokens*c.Hidden*int64(fp), fwd(66, "forward"))) // attn out
			s.Free(0, tmp)
			saved = append(saved, s.Alloc(0, 4*tokens*c.Hidden*int64(fp), fwd(70, "forward"))) // mlp hidden
			s.Tick(100)
		}
		loss := s.Alloc(0, 4, s.Stack(s.F("torch/nn/functional.py", 3494, "cross_entropy"), s.F("train.py", 93, "<module>")))
		// Backward: the autograd engine runs in a C++ thread; no Python frames.
		var bwd *List
		if !c.NoBwdStack {
			bwd = s.Stack(s.F("torch/autograd/graph.py", 825, "_engine_run_backward"), s.F("torch/_tensor.py", 626, "backward"), s.F("train.py", 94, "<module>"))
		}
		for i := len(params) - 1; i >= 0; i-- {
			if len(saved) > 0 {
				tmp := s.Alloc(0, params[i], bwd) // grad of the activation
				s.Free(0, saved[len(saved)-1])
				saved = saved[:len(saved)-1]
				s.Free(0, tmp)
			}
			grads = append(grads, s.Alloc(0, params[i], bwd))
			s.Tick(20)
		}
		for _, a := range saved {
			s.Free(0, a)
		}
		s.Free(0, loss)
		s.Free(0, x)
		s.Annotate(0, "Optimizer.step#AdamW.step", func() {
			if state == nil {
				init := s.Stack(s.F("torch/optim/adamw.py", 174, "_init_group"), s.F("torch/optim/adamw.py", 209, "step"), s.F("torch/optim/optimizer.py", 485, "wrapper"), s.F("train.py", 96, "<module>"))
				for _, p := range params {
					state = append(state, s.Alloc(0, p, init), s.Alloc(0, p, init)) // exp_avg, exp_avg_sq
				}
			}
			upd := s.Stack(s.F("torch/optim/adamw.py", 398, "_single_tensor_adamw"), s.F("torch/optim/adamw.py", 220, "step"), s.F("train.py", 96, "<module>"))
			for _, p := range params {
				t := s.Alloc(0, p, upd)
				s.Free(0, t)
			}
		})
		s.Tick(1000)
	}
	_ = paramAddrs
	return s
}

// Describe returns a one-line description of a config, for test names.
func (c TrainConfig) Describe() string {
	return fmt.Sprintf("%d layers, hidden %d, seq %d, batch %d, %d steps", c.Layers, c.Hidden, c.Seq, c.Batch, c.Steps)
}

// ManyDevices simulates n devices each running the same three steps (a
// 4 MiB and a 1 MiB tensor per ProfilerStep#k): a run on n ranks' local
// devices, or a hostile file of many devices, for tests and benchmarks of
// work per device.
func ManyDevices(n int) *Sim {
	s := NewSim()
	fwd := s.Stack(s.F("model.py", 9, "forward"), s.F("train.py", 3, "<module>"))
	for d := range n {
		for step := range 3 {
			s.Annotate(d, fmt.Sprint("ProfilerStep#", step), func() {
				a := s.Alloc(d, 4<<20, fwd)
				b := s.Alloc(d, 1<<20, fwd)
				s.Free(d, b)
				s.Free(d, a)
			})
		}
	}
	return s
}
