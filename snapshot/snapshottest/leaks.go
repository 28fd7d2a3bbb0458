package snapshottest

import (
	"fmt"
	"strings"
)

// LeakConfig sizes the leak scenarios: a small transformer-like model run
// for a number of steps (training or evaluation iterations).
type LeakConfig struct {
	Layers int   // transformer blocks
	Hidden int64 // hidden size
	Tokens int64 // batch·sequence tokens per step
	Vocab  int64 // vocabulary (logits are Tokens·Vocab floats)
	Steps  int   // iterations recorded
	// Profiler wraps every iteration in a ProfilerStep#N range (as
	// torch.profiler.profile(schedule=…) does), numbered from 1.
	Profiler bool
	// Stacks is what the recorded stacks hold (default: module frames).
	Stacks StackKind
	// Autocast runs the forward under torch.autocast("cuda",
	// dtype=torch.bfloat16): each linear layer's fp32 weight is cast to a
	// bf16 copy at its first use in the region, cached until the region
	// exits (or, under grad mode, until the graph that saved it dies);
	// linear outputs and the logits are bf16.
	Autocast bool
	// VaryTokens gives the iterations different sequence lengths (tokens
	// ×0.90…×1.10) and, for those shorter or longer than Tokens, a padding
	// mask: allocation counts and sizes differ between iterations.
	VaryTokens bool
	// FirstExtra makes the first iteration allocate more: a cuBLAS-style
	// workspace kept for the run and a lazily made buffer.
	FirstExtra bool
	// KeepHidden makes EvalLoopKeepingOutputs also keep each step's last
	// hidden state (hidden.append(model.norm_out) — model.py:146 forward):
	// two growing lists of one step pattern.
	KeepHidden bool
	// Framework drives the evaluation loop from a framework (a hydra entry
	// point running a Lightning-style prediction loop): deep library stacks,
	// the loop in the library, the user's code in predict_step.
	Framework bool
	// Functional writes the model as plain functions (fmodel.py: def
	// model(x, ws) whose loop `for w in ws.layers: h = block(h, w)` sits at
	// fmodel.py:140, def block(x, w) at fmodel.py:60–72) called with its
	// weights: no nn.Module frames and no forward frames in any stack.
	Functional bool
}

// DefaultLeakConfig is a 4-layer model, 512 tokens per step, 8 steps:
// activations of 512 KiB, logits of 2 MB.
var DefaultLeakConfig = LeakConfig{Layers: 4, Hidden: 256, Tokens: 512, Vocab: 1000, Steps: 8}

// ActivationBytes is the size of one activation (Tokens·Hidden float32),
// for test assertions.
func (c LeakConfig) ActivationBytes() int64 { return c.Tokens * c.Hidden * 4 }

// LogitsBytes is the size of one step's logits (float32; bf16 under
// autocast).
func (c LeakConfig) LogitsBytes() int64 {
	if c.Autocast {
		return c.Tokens * c.Vocab * 2
	}
	return c.Tokens * c.Vocab * 4
}

// CastBytesPerLayer is what autocast's weight cache holds per layer: bf16
// copies of the four linear weights (qkv 3h², output h², MLP 4h² and 4h²).
func (c LeakConfig) CastBytesPerLayer() int64 { return 12 * c.Hidden * c.Hidden * 2 }

// CacheBytes is what autocast's weight cache holds for the whole model: the
// layers' copies and the LM head's (tied with the embedding, Vocab·h).
func (c LeakConfig) CacheBytes() int64 {
	return int64(c.Layers)*c.CastBytesPerLayer() + c.Vocab*c.Hidden*2
}

// SavedPerStep is what the forward of one step saves for backward under
// grad mode: the token ids (embedding), per layer the layer-norm output,
// qkv, attention output and MLP hidden (bf16 under autocast, with the
// weight copies the matmuls save), the final norm, and the logits (with
// the LM head's weight copy under autocast).
func (c LeakConfig) SavedPerStep() int64 {
	a := c.ActivationBytes()
	if c.Autocast {
		return c.Tokens*8 + int64(c.Layers)*(a+(3*a+a+4*a)/2) + c.CacheBytes() + a + c.LogitsBytes()
	}
	return c.Tokens*8 + int64(c.Layers)*(a+3*a+a+4*a) + a + c.LogitsBytes()
}

// tokenScale is the sequence length of iteration k (from 1) relative to
// Tokens, in percent, when VaryTokens is set: a spread around 100% whose
// median is 100%.
var tokenScale = []int64{100, 92, 108, 96, 104, 100, 90, 110}

// tokens is the tokens of iteration k (from 1).
func (c LeakConfig) tokens(k int) int64 {
	if !c.VaryTokens || k < 1 {
		return c.Tokens
	}
	return c.Tokens * tokenScale[(k-1)%len(tokenScale)] / 100
}

// leakModel simulates the model of the leak scenarios: parameters allocated
// before recording began, a forward with nn.Module frames, a backward
// without Python frames (the autograd engine's C++ thread), and AdamW.
type leakModel struct {
	s      *Sim
	c      LeakConfig
	script string // the user's script: train.py / eval.py / bench.py
	fn     string // the function of the script that holds the loop
	tokens int64  // tokens of the current iteration
	params []int64
	grads  []uint64
	state  []uint64
	call   *Dict
	wrap   *Dict
	linear *Dict
	// cache is autocast's weight cache of the current region: parameter
	// index → bf16 copy.
	cache map[int]uint64
}

func newLeakModel(s *Sim, c LeakConfig, script, fn string) *leakModel {
	m := &leakModel{s: s, c: c, script: script, fn: fn, tokens: c.Tokens,
		call:   s.F("torch/nn/modules/module.py", 1787, "_call_impl"),
		wrap:   s.F("torch/nn/modules/module.py", 1776, "_wrapped_call_impl"),
		linear: s.F("torch/nn/modules/linear.py", 125, "forward"),
	}
	build := m.stack("empty", s.F("torch/nn/modules/linear.py", 106, "__init__"), s.F("model.py", 31, "__init__"), s.F(script, 20, "<module>"))
	s.NoTrace = true
	h := c.Hidden
	m.params = append(m.params, c.Vocab*h*4) // embedding (tied with the LM head)
	for l := 0; l < c.Layers; l++ {
		m.params = append(m.params, 3*h*h*4, h*h*4, 4*h*h*4, 4*h*h*4)
	}
	for _, p := range m.params {
		s.Alloc(0, p, build)
	}
	s.NoTrace = false
	return m
}

// at is the stack of an allocation by op in a transformer block at
// model.py:line (name), the blocks being called in a loop by the model's
// forward at model.py:140, the model being called from outer frames. inner
// adds library frames inside the block.
func (m *leakModel) at(line int, name, op string, outer []*Dict, inner ...*Dict) *List {
	s := m.s
	var fr []*Dict
	fr = append(fr, inner...)
	fr = append(fr, s.F("model.py", line, name), m.call, m.wrap, s.F("model.py", 140, "forward"), m.call, m.wrap)
	return m.stack(op, append(fr, outer...)...)
}

// top is the stack of an allocation by op made by a submodule the model's
// own forward calls at model.py:line (the embedding, the final norm, the
// LM head), inner holding the submodule's library frames.
func (m *leakModel) top(line int, op string, outer []*Dict, inner ...*Dict) *List {
	s := m.s
	fr := append([]*Dict(nil), inner...)
	fr = append(fr, s.F("model.py", line, "forward"), m.call, m.wrap)
	return m.stack(op, append(fr, outer...)...)
}

// user is the stack of an allocation by op on a line of the loop body.
func (m *leakModel) user(line int, op string, inner ...*Dict) *List {
	fr := append([]*Dict(nil), inner...)
	return m.stack(op, append(fr, m.outer(line)...)...)
}

// cast returns autocast's bf16 copy of parameter p, made at its first use
// in the region with the stack of the op that uses it (the copy is made
// inside that op, just before its output).
func (m *leakModel) cast(p int, st *List) {
	if !m.c.Autocast || m.cache[p] != 0 {
		return
	}
	if m.cache == nil {
		m.cache = map[int]uint64{}
	}
	switch m.c.Stacks {
	case StacksCpp:
		st = m.s.Stack(m.cpp("cached_cast")...)
	case StacksUserCpp:
		// the op's Python frames under autocast's cast instead of its kernel
		py := st.Items[len(m.cpp("addmm")):]
		fr := m.cpp("cached_cast")
		for _, f := range py {
			fr = append(fr, f.(*Dict))
		}
		st = m.s.Stack(fr...)
	}
	m.cache[p] = m.s.Alloc(0, m.params[p]/2, st)
}

// exitAutocast ends the autocast region: the cache drops its copies; those
// a graph saved (grad mode) stay until the graph dies and are returned.
func (m *leakModel) exitAutocast(grad bool) []uint64 {
	var kept []uint64
	for p := 0; p < len(m.params); p++ {
		if a, ok := m.cache[p]; ok {
			if grad {
				kept = append(kept, a)
			} else {
				m.s.Free(0, a)
			}
		}
	}
	m.cache = nil
	return kept
}

// half is n, halved under autocast (a bf16 output of a linear layer).
func (m *leakModel) half(n int64) int64 {
	if m.c.Autocast {
		return n / 2
	}
	return n
}

// forward runs the model on the token ids x of the current iteration,
// called from the outer frames. Under grad mode it returns every tensor
// saved for backward (the token ids included; under autocast the weight
// copies are saved when the region exits, see exitAutocast) and the
// logits; under no_grad activations are freed as soon as the next layer
// has consumed them, and saved is empty.
func (m *leakModel) forward(x uint64, grad bool, outer []*Dict) (saved []uint64, logits uint64) {
	s, c := m.s, m.c
	a := m.tokens * c.Hidden * 4
	h := s.Alloc(0, a, m.top(135, "embedding", outer, s.F("torch/nn/functional.py", 2551, "embedding"), s.F("torch/nn/modules/sparse.py", 190, "forward"), m.call, m.wrap)) // embedding output
	var live []uint64
	keep := func(b uint64) {
		if grad {
			saved = append(saved, b)
		} else {
			live = append(live, b)
		}
	}
	if grad {
		saved = append(saved, x) // the embedding saves its indices
	}
	var mask uint64
	if m.tokens != c.Tokens {
		// padded batch: an attention mask for this sequence length
		mask = s.Alloc(0, m.tokens*m.tokens/8, m.top(138, "ones", outer))
	}
	linear := func(line int, p int, size int64) uint64 {
		st := m.at(line, "forward", "addmm", outer, m.linear, m.call, m.wrap)
		m.cast(p, st)
		return s.Alloc(0, m.half(size), st)
	}
	for l := 0; l < c.Layers; l++ {
		p := 1 + 4*l
		ln := s.Alloc(0, a, m.at(60, "forward", "layer_norm", outer))
		keep(ln)
		qkv := linear(62, p, 3*a)
		keep(qkv)
		tmp := s.Alloc(0, a, m.at(65, "attention", "softmax", outer)) // scaled scores, freed at once
		out := linear(66, p+1, a)
		s.Free(0, tmp)
		keep(out)
		mlp := linear(70, p+2, 4*a)
		keep(mlp)
		down := linear(71, p+3, a)                             // the MLP's output projection
		nh := s.Alloc(0, a, m.at(72, "forward", "add", outer)) // residual: the layer's output
		s.Free(0, down)
		s.Free(0, h)
		h = nh
		if !grad {
			for _, b := range live {
				s.Free(0, b)
			}
			live = live[:0]
		}
		s.Tick(100)
	}
	norm := s.Alloc(0, a, m.top(146, "layer_norm", outer, s.F("torch/nn/functional.py", 2910, "layer_norm"), s.F("torch/nn/modules/normalization.py", 217, "forward"), m.call, m.wrap))
	s.Free(0, h)
	keep(norm)
	head := m.top(150, "addmm", outer, m.linear, m.call, m.wrap)
	m.cast(0, head)
	logits = s.Alloc(0, m.half(m.tokens*c.Vocab*4), head)
	if !grad {
		s.Free(0, norm)
	}
	if mask != 0 {
		s.Free(0, mask)
	}
	return saved, logits
}

// backward frees the saved tensors (innermost first) and makes the
// gradients; its allocations have no Python frames.
func (m *leakModel) backward(saved []uint64) {
	s := m.s
	bwd := m.stack("backward: MmBackward0")
	for i := len(m.params) - 1; i >= 0; i-- {
		if len(saved) > 0 {
			tmp := s.Alloc(0, m.params[i], bwd) // grad of an activation
			s.Free(0, saved[len(saved)-1])
			saved = saved[:len(saved)-1]
			s.Free(0, tmp)
		}
		m.grads = append(m.grads, s.Alloc(0, m.params[i], bwd))
		s.Tick(20)
	}
	for _, b := range saved {
		s.Free(0, b)
	}
}

// backwardRetained is backward(retain_graph=True): the saved tensors stay.
func (m *leakModel) backwardRetained() {
	s := m.s
	bwd := m.stack("backward: MmBackward0")
	for i := len(m.params) - 1; i >= 0; i-- {
		tmp := s.Alloc(0, m.params[i], bwd)
		s.Free(0, tmp)
		m.grads = append(m.grads, s.Alloc(0, m.params[i], bwd))
		s.Tick(20)
	}
}

// zeroGrad frees the gradients (set_to_none=True).
func (m *leakModel) zeroGrad() {
	m.s.Annotate(0, "Optimizer.zero_grad#AdamW.zero_grad", func() {
		for _, g := range m.grads {
			m.s.Free(0, g)
		}
		m.grads = nil
	})
}

// optimizerStep runs AdamW.step: state created at the first step, one
// temporary per parameter.
func (m *leakModel) optimizerStep() {
	s := m.s
	s.Annotate(0, "Optimizer.step#AdamW.step", func() {
		if m.state == nil {
			init := m.stack("zeros_like", s.F("torch/optim/adamw.py", 174, "_init_group"), s.F("torch/optim/adamw.py", 209, "step"), s.F("torch/optim/optimizer.py", 485, "wrapper"), s.F(m.script, 99, "<module>"))
			for _, p := range m.params {
				m.state = append(m.state, s.Alloc(0, p, init), s.Alloc(0, p, init))
			}
		}
		upd := m.stack("mul", s.F("torch/optim/adamw.py", 398, "_single_tensor_adamw"), s.F("torch/optim/adamw.py", 220, "step"), s.F(m.script, 99, "<module>"))
		for _, p := range m.params {
			t := s.Alloc(0, p, upd)
			s.Free(0, t)
		}
	})
}

// step runs fn as iteration n, inside ProfilerStep#n when configured.
func (m *leakModel) step(n int, fn func()) {
	m.tokens = m.c.tokens(n)
	if len(m.s.StepAllocated) == 0 {
		m.s.StepAllocated = append(m.s.StepAllocated, m.s.Allocated(0))
	}
	if m.c.Profiler {
		m.s.Annotate(0, fmt.Sprintf("ProfilerStep#%d", n), fn)
	} else {
		fn()
	}
	m.s.StepAllocated = append(m.s.StepAllocated, m.s.Allocated(0))
	m.s.Tick(1000)
}

// firstExtra allocates, in the first iteration only, what a real program
// makes lazily on first use: a workspace kept for the run (cuBLAS's, 8 MiB
// and a bit) and a buffer freed at once.
func (m *leakModel) firstExtra(n int) {
	if !m.c.FirstExtra || n != 1 {
		return
	}
	s := m.s
	ws := m.at(62, "forward", "addmm", m.outer(41), m.linear, m.call, m.wrap)
	if m.c.Stacks == StacksCpp {
		ws = s.Stack(s.F("", 0, "at::cuda::getCurrentCUDABlasHandle()"), s.F("", 0, "at::native::addmm(at::Tensor const&)"))
	}
	s.Alloc(0, 8519680, ws)
	b := s.Alloc(0, 1<<20, m.user(40, "empty"))
	s.Free(0, b)
}

// EvalLoop simulates an evaluation loop in eval.py:
//
//	for x, y in loader:                      # eval.py:38
//	    logits = model(x)                    # eval.py:41
//	    loss = F.cross_entropy(logits, y)    # eval.py:42
//	    total_loss += loss                   # eval.py:43
//
// With leak, it runs under grad mode and accumulates the loss tensor: the
// graph of every step (all its saved activations, Config.SavedPerStep
// bytes) stays alive through total_loss — the retained_graph leak, whose
// call site is "eval.py:41 evaluate". Without, it runs under torch.no_grad()
// with total_loss += loss.item(): nothing outlives its step. Under
// autocast the region is the loop body; VaryTokens and FirstExtra vary
// the iterations; under Framework the loop is a Lightning-style
// prediction loop calling predict_step (lit_module.py:41–43 instead of
// eval.py:41–43; the batch moved by the loop), called from a hydra main.
func EvalLoop(c LeakConfig, leak bool) *Sim { return evalLoop(c, leak, false, loopShape{}) }

// EvalLoopKeepingOutputs is EvalLoop under torch.no_grad() that keeps every
// step's logits on the GPU (outputs.append(logits) at eval.py:43, or
// lit_module.py:43 under Framework): the growing_list leak at
// "model.py:150 forward", LogitsBytes per step.
func EvalLoopKeepingOutputs(c LeakConfig) *Sim { return evalLoop(c, false, true, loopShape{}) }

func evalLoop(c LeakConfig, leak, keepOutputs bool, shape loopShape) *Sim {
	m := newLeakModel(NewSim(), c, "eval.py", "evaluate")
	m.evalSteps(leak, keepOutputs, shape, 38, 1)
	return m.s
}

// evalSteps runs the iterations of EvalLoop, the loop body's first line at
// head (eval.py:38: the model called at head+3, the loss at head+4, the
// total at head+5), numbered from first.
func (m *leakModel) evalSteps(leak, keepOutputs bool, shape loopShape, head, first int) {
	s, c := m.s, m.c
	var x, total uint64
	var prevLogits uint64
	shape.warmUp(m)
	var epoch uint64
	for step := first; step < first+c.Steps; step++ {
		epoch = shape.epochStart(m, step, epoch)
		m.step(step, func() {
			nx := s.Alloc(0, m.tokens*8, m.dataStack(head)) // x.to(device)
			if x != 0 && !leak {
				s.Free(0, x) // the previous batch, released when x is rebound
			}
			x = nx
			m.firstExtra(step)
			saved, logits := m.forward(x, leak, m.outer(head+3))
			if prevLogits != 0 {
				s.Free(0, prevLogits)
				prevLogits = 0
			}
			ce := s.F("torch/nn/functional.py", 3494, "cross_entropy")
			ls := s.Alloc(0, m.tokens*4, m.user(head+4, "log_softmax", ce)) // log-softmax denominators
			loss := s.Alloc(0, 4, m.user(head+4, "nll_loss", ce))
			// the autocast region ends: under grad mode the graph keeps the
			// weight copies it saved, with the rest of saved
			saved = append(saved, m.exitAutocast(leak)...)
			if leak {
				// total_loss = total_loss + loss: a new scalar each step; the
				// old one dies (AddBackward saves nothing), but every step's
				// graph hangs on the new one, with everything it saved (the
				// ids and activations in saved, the logits, ls) and the
				// loss: none of them is ever freed.
				nt := s.Alloc(0, 4, m.user(head+5, "add"))
				if total != 0 {
					s.Free(0, total)
				}
				total = nt
				_ = saved // held by the graph on total_loss
				return
			}
			s.Free(0, ls)
			s.Free(0, loss) // loss.item() copies to the host; the tensor dies
			if keepOutputs && c.KeepHidden {
				// the final norm's output, kept by the model for the caller
				s.Alloc(0, m.tokens*c.Hidden*4, m.top(146, "layer_norm", m.outer(head+3), s.F("torch/nn/functional.py", 2910, "layer_norm"), s.F("torch/nn/modules/normalization.py", 217, "forward"), m.call, m.wrap))
			}
			if keepOutputs {
				return // outputs.append(logits): never freed
			}
			prevLogits = logits
		})
	}
}

// trainFault selects what goes wrong in trainLoop.
type trainFault struct {
	keepLogits  bool  // outputs.append(logits): each step's logits kept, not detached
	cycleEvery  int   // > 0: a tensor per step kept in a reference cycle, collected every cycleEvery steps
	growCat     bool  // history = torch.cat([history, h.detach()]): a buffer one activation larger every step
	growScratch int64 // > 0: a forward temporary that many bytes larger every step (reserved grows)
	retainGraph bool  // loss.backward(retain_graph=True) and losses.append(loss): every graph kept
}

// trainLoop is a training loop in train.py (zero_grad, forward, backward,
// AdamW step) with the fault f.
func trainLoop(c LeakConfig, f trainFault) *Sim {
	return runTrainLoop(NewSim(), c, f)
}

// runTrainLoop runs trainLoop on the simulator s.
func runTrainLoop(s *Sim, c LeakConfig, f trainFault) *Sim {
	m := newLeakModel(s, c, "train.py", "<module>")
	m.trainSteps(f)
	return s
}

// trainSteps runs the iterations of trainLoop (train.py:90–101).
func (m *leakModel) trainSteps(f trainFault) {
	s, c := m.s, m.c
	var prevLogits, prevX, history uint64
	var cycle []uint64
	for step := 1; step <= c.Steps; step++ {
		m.step(step, func() {
			m.zeroGrad()
			x := s.Alloc(0, m.tokens*8, m.user(90, "_to_copy"))
			if prevX != 0 {
				s.Free(0, prevX)
			}
			prevX = x
			if f.retainGraph {
				prevX = 0 // the embedding of the kept graph saved the ids
			}
			saved, logits := m.forward(x, true, m.outer(92))
			saved = saved[1:] // the ids stay referenced by the loop variable
			if prevLogits != 0 {
				s.Free(0, prevLogits) // the previous step's logits, released on rebinding
				prevLogits = 0
			}
			if f.growScratch > 0 {
				// attention scratch of a longer sequence every step: the
				// cache cannot reuse the last one and reserves a new segment.
				t := s.Alloc(0, 4*c.ActivationBytes()+int64(step)*f.growScratch, m.at(64, "attention", "softmax", m.outer(92)))
				s.Free(0, t)
			}
			if f.cycleEvery > 0 {
				if step%f.cycleEvery == 1 && step > 1 {
					// gc.collect() (or the collector's own threshold) finds
					// the cycles and frees what they held, all at once.
					for i := len(cycle) - 1; i >= 0; i-- {
						s.Free(0, cycle[i])
					}
					cycle = nil
				}
				// self.last = {"features": h.detach(), "owner": self}
				cycle = append(cycle, s.Alloc(0, 2*c.ActivationBytes(), m.at(96, "forward", "empty", m.outer(92))))
			}
			ce := s.F("torch/nn/functional.py", 3494, "cross_entropy")
			ls := s.Alloc(0, m.tokens*4, m.user(93, "log_softmax", ce))
			loss := s.Alloc(0, 4, m.user(93, "nll_loss", ce))
			saved = append(saved, m.exitAutocast(true)...)
			saved = append(saved, ls)
			if f.retainGraph {
				m.backwardRetained()
			} else {
				m.backward(saved)
			}
			if f.growCat {
				n := int64(step) * c.ActivationBytes()
				nh := s.Alloc(0, n, m.user(101, "cat")) // torch.cat: no Python frame of its own
				if history != 0 {
					s.Free(0, history)
				}
				history = nh
			}
			m.optimizerStep()
			if !f.retainGraph {
				s.Free(0, loss)
			}
			if f.keepLogits {
				return // outputs.append(logits): never freed
			}
			prevLogits = logits
		})
	}
}

// TrainLoopHealthy is a correct training loop in train.py: every step's
// tensors are freed by the next step; nothing accumulates.
func TrainLoopHealthy(c LeakConfig) *Sim { return trainLoop(c, trainFault{}) }

// TrainLoopGrowingList is a training loop that keeps each step's logits in a
// list (outputs.append(logits) at train.py:92): after backward their graph
// is freed, but the logits themselves (Config.LogitsBytes per step, site
// "model.py:150 forward") are never freed — the growing_list leak.
func TrainLoopGrowingList(c LeakConfig) *Sim { return trainLoop(c, trainFault{keepLogits: true}) }

// CycleSawtooth is a training loop whose model keeps each step's features
// (2·ActivationBytes, allocated at "model.py:96 forward") in an object
// that is part of a reference cycle: they are freed only when the garbage
// collector runs, every `every` steps, all at once — the reference_cycle
// sawtooth.
func CycleSawtooth(c LeakConfig, every int) *Sim { return trainLoop(c, trainFault{cycleEvery: every}) }

// TrainLoopGrowingCat is a training loop that grows a history buffer with
// torch.cat at train.py:101 each step: the old buffer is freed, the new one
// is one activation (Config.ActivationBytes) larger — no block survives two
// steps, but allocated memory at the start of each step rises by one
// activation: step_growth.
func TrainLoopGrowingCat(c LeakConfig) *Sim { return trainLoop(c, trainFault{growCat: true}) }

// TrainLoopRetainGraph is a training loop that calls
// loss.backward(retain_graph=True) and keeps every loss (losses.append(loss)
// at train.py:93): backward runs, but every step's saved activations stay
// (Config.SavedPerStep − LogitsBytes + Tokens·4 + 4 bytes per step: the
// logits are not saved here, the log-softmax statistics and the loss are) —
// retained_graph, forward called at "train.py:92 <module>".
func TrainLoopRetainGraph(c LeakConfig) *Sim { return trainLoop(c, trainFault{retainGraph: true}) }

// TrainLoopReservedDrift is a healthy training loop whose attention scratch
// (a temporary freed at once) is grow bytes larger every step, as with
// sequences that get longer: reserved memory grows (the cache cannot reuse
// its segments and keeps them) while allocated memory at each step boundary
// stays flat — not a leak.
func TrainLoopReservedDrift(c LeakConfig, grow int64) *Sim {
	return trainLoop(c, trainFault{growScratch: grow})
}

// KinetoGrowingList writes a small Kineto chrome trace, as
// prof.export_chrome_trace writes it with profile_memory=True,
// with_stack=True and a schedule, of an inference loop of steps
// ProfilerStep#1…#steps that keeps every step's output on the GPU
// (outputs.append(model(x)) at eval.py:41). Each step runs three aten::linear
// ops inside "model.py(60): forward", each allocating an output of output
// bytes and freeing a temporary; the outputs of the first two are freed by
// the next op, the last one is never freed — growing_list at site
// "model.py:60 forward", output bytes per step. Device 0 has capacity bytes
// (deviceProperties totalGlobalMem) and baseline bytes allocated before the
// window (the model).
func KinetoGrowingList(steps int, output, capacity, baseline int64) []byte {
	var ev []string
	ts := int64(1_000_000)
	total := baseline
	addr := uint64(0x7f0000000000)
	span := func(cat, name string, start, dur int64) {
		ev = append(ev, fmt.Sprintf(`{"ph": "X", "cat": %q, "name": %q, "pid": 100, "tid": 100, "ts": %d, "dur": %d, "args": {}}`, cat, name, start, dur))
	}
	memory := func(t int64, a uint64, bytes int64) {
		total += bytes
		ev = append(ev, fmt.Sprintf(`{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 100, "tid": 100, "ts": %d, "args": {"Total Reserved": %d, "Total Allocated": %d, "Bytes": %d, "Addr": %d, "Device Id": 0, "Device Type": 1}}`,
			t, 1<<34, total, bytes, a))
	}
	newAddr := func() uint64 { a := addr; addr += 0x4000000; return a }
	for st := 1; st <= steps; st++ {
		start := ts
		fwd := ts + 10
		span("python_function", "eval.py(41): evaluate", fwd-5, 330)
		span("python_function", "nn.Module: Model_0", fwd-3, 320)
		span("python_function", "model.py(60): forward", fwd, 310)
		prev := uint64(0)
		for l := 0; l < 3; l++ {
			op := fwd + 5 + int64(l)*100
			span("cpu_op", "aten::linear", op, 60)
			tmp := newAddr()
			memory(op+10, tmp, output/4)
			out := newAddr()
			memory(op+20, out, output)
			memory(op+30, tmp, -output/4)
			if prev != 0 {
				memory(op+40, prev, -output)
			}
			prev = out
		}
		ts = fwd + 400
		span("user_annotation", fmt.Sprintf("ProfilerStep#%d", st), start, ts-start)
		ts += 10
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": %d}], "profile_memory": 1, "with_stack": 1, "traceEvents": [`, capacity)
	b.WriteString(strings.Join(ev, ",\n"))
	b.WriteString(`], "traceName": "growing_list.json", "displayTimeUnit": "ms"}`)
	return []byte(b.String())
}
