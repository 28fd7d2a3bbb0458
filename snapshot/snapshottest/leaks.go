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
}

// DefaultLeakConfig is a 4-layer model, 512 tokens per step, 8 steps:
// activations of 512 KiB, logits of 2 MB.
var DefaultLeakConfig = LeakConfig{Layers: 4, Hidden: 256, Tokens: 512, Vocab: 1000, Steps: 8}

// ActivationBytes is the size of one activation (Tokens·Hidden float32),
// for test assertions.
func (c LeakConfig) ActivationBytes() int64 { return c.Tokens * c.Hidden * 4 }

// LogitsBytes is the size of one step's logits (float32).
func (c LeakConfig) LogitsBytes() int64 { return c.Tokens * c.Vocab * 4 }

// SavedPerStep is what the forward of one step saves for backward under
// grad mode: the token ids (embedding), per layer the layer-norm output,
// qkv, attention output and MLP hidden, the final norm, and the logits.
func (c LeakConfig) SavedPerStep() int64 {
	a := c.ActivationBytes()
	return c.Tokens*8 + int64(c.Layers)*(a+3*a+a+4*a) + a + c.LogitsBytes()
}

// leakModel simulates the model of the leak scenarios: parameters allocated
// before recording began, a forward with nn.Module frames, a backward
// without Python frames (the autograd engine's C++ thread), and AdamW.
type leakModel struct {
	s      *Sim
	c      LeakConfig
	script string // the user's script: train.py / eval.py
	params []int64
	grads  []uint64
	state  []uint64
	call   *Dict
	wrap   *Dict
	linear *Dict
}

func newLeakModel(s *Sim, c LeakConfig, script string) *leakModel {
	m := &leakModel{s: s, c: c, script: script,
		call:   s.F("torch/nn/modules/module.py", 1787, "_call_impl"),
		wrap:   s.F("torch/nn/modules/module.py", 1776, "_wrapped_call_impl"),
		linear: s.F("torch/nn/modules/linear.py", 125, "forward"),
	}
	build := s.Stack(s.F("torch/nn/modules/linear.py", 106, "__init__"), s.F("model.py", 31, "__init__"), s.F(script, 20, "<module>"))
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

// at is the stack of an allocation in a transformer block at
// model.py:line (name), the blocks being called in a loop by the model's
// forward at model.py:140, the model from the user's script at
// script:callLine in fn (itself called from the script's <module> at line
// 60). inner adds library frames inside the block.
func (m *leakModel) at(line int, name string, callLine int, fn string, inner ...*Dict) *List {
	s := m.s
	var fr []*Dict
	fr = append(fr, inner...)
	fr = append(fr, s.F("model.py", line, name), m.call, m.wrap, s.F("model.py", 140, "forward"), m.call, m.wrap,
		s.F(m.script, callLine, fn))
	if fn != "<module>" {
		fr = append(fr, s.F(m.script, 60, "<module>"))
	}
	return s.Stack(fr...)
}

// top is the stack of an allocation made by a submodule the model's own
// forward calls at model.py:line (the embedding, the final norm, the LM
// head), inner holding the submodule's library frames.
func (m *leakModel) top(line int, callLine int, fn string, inner ...*Dict) *List {
	s := m.s
	fr := append([]*Dict(nil), inner...)
	fr = append(fr, s.F("model.py", line, "forward"), m.call, m.wrap, s.F(m.script, callLine, fn))
	if fn != "<module>" {
		fr = append(fr, s.F(m.script, 60, "<module>"))
	}
	return s.Stack(fr...)
}

// user is the stack of an allocation on a line of the user's script.
func (m *leakModel) user(line int, fn string, inner ...*Dict) *List {
	fr := append([]*Dict(nil), inner...)
	fr = append(fr, m.s.F(m.script, line, fn))
	if fn != "<module>" {
		fr = append(fr, m.s.F(m.script, 60, "<module>"))
	}
	return m.s.Stack(fr...)
}

// forward runs the model on tokens ids, called from callLine in fn. Under
// grad mode it returns every tensor saved for backward (the token ids
// included) and the logits; under no_grad activations are freed as soon as
// the next layer has consumed them, and saved is empty.
func (m *leakModel) forward(x uint64, grad bool, callLine int, fn string) (saved []uint64, logits uint64) {
	s, c := m.s, m.c
	a := c.ActivationBytes()
	h := s.Alloc(0, a, m.top(135, callLine, fn, s.F("torch/nn/functional.py", 2551, "embedding"), s.F("torch/nn/modules/sparse.py", 190, "forward"), m.call, m.wrap)) // embedding output
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
	for l := 0; l < c.Layers; l++ {
		ln := s.Alloc(0, a, m.at(60, "forward", callLine, fn))
		keep(ln)
		qkv := s.Alloc(0, 3*a, m.at(62, "forward", callLine, fn, m.linear, m.call, m.wrap))
		keep(qkv)
		tmp := s.Alloc(0, a, m.at(65, "attention", callLine, fn)) // scaled scores, freed at once
		out := s.Alloc(0, a, m.at(66, "forward", callLine, fn))
		s.Free(0, tmp)
		keep(out)
		mlp := s.Alloc(0, 4*a, m.at(70, "forward", callLine, fn, m.linear, m.call, m.wrap))
		keep(mlp)
		nh := s.Alloc(0, a, m.at(72, "forward", callLine, fn)) // residual: the layer's output
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
	norm := s.Alloc(0, a, m.top(146, callLine, fn, s.F("torch/nn/functional.py", 2910, "layer_norm"), s.F("torch/nn/modules/normalization.py", 217, "forward"), m.call, m.wrap))
	s.Free(0, h)
	keep(norm)
	logits = s.Alloc(0, c.LogitsBytes(), m.top(150, callLine, fn, m.linear, m.call, m.wrap))
	if !grad {
		s.Free(0, norm)
	}
	return saved, logits
}

// backward frees the saved tensors (innermost first) and makes the
// gradients; its allocations have no Python frames.
func (m *leakModel) backward(saved []uint64) {
	s := m.s
	for i := len(m.params) - 1; i >= 0; i-- {
		if len(saved) > 0 {
			tmp := s.Alloc(0, m.params[i], nil) // grad of an activation
			s.Free(0, saved[len(saved)-1])
			saved = saved[:len(saved)-1]
			s.Free(0, tmp)
		}
		m.grads = append(m.grads, s.Alloc(0, m.params[i], nil))
		s.Tick(20)
	}
	for _, b := range saved {
		s.Free(0, b)
	}
}

// backwardRetained is backward(retain_graph=True): the saved tensors stay.
func (m *leakModel) backwardRetained() {
	s := m.s
	for i := len(m.params) - 1; i >= 0; i-- {
		tmp := s.Alloc(0, m.params[i], nil)
		s.Free(0, tmp)
		m.grads = append(m.grads, s.Alloc(0, m.params[i], nil))
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
			init := s.Stack(s.F("torch/optim/adamw.py", 174, "_init_group"), s.F("torch/optim/adamw.py", 209, "step"), s.F("torch/optim/optimizer.py", 485, "wrapper"), s.F(m.script, 99, "<module>"))
			for _, p := range m.params {
				m.state = append(m.state, s.Alloc(0, p, init), s.Alloc(0, p, init))
			}
		}
		upd := s.Stack(s.F("torch/optim/adamw.py", 398, "_single_tensor_adamw"), s.F("torch/optim/adamw.py", 220, "step"), s.F(m.script, 99, "<module>"))
		for _, p := range m.params {
			t := s.Alloc(0, p, upd)
			s.Free(0, t)
		}
	})
}

// step runs fn as iteration n, inside ProfilerStep#n when configured.
func (m *leakModel) step(n int, fn func()) {
	if m.c.Profiler {
		m.s.Annotate(0, fmt.Sprintf("ProfilerStep#%d", n), fn)
	} else {
		fn()
	}
	m.s.Tick(1000)
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
// with total_loss += loss.item(): nothing outlives its step.
func EvalLoop(c LeakConfig, leak bool) *Sim {
	m := newLeakModel(NewSim(), c, "eval.py")
	s := m.s
	var x, total uint64
	var prevLogits uint64
	for step := 1; step <= c.Steps; step++ {
		m.step(step, func() {
			nx := s.Alloc(0, c.Tokens*8, m.user(38, "evaluate")) // x.to(device)
			if x != 0 && !leak {
				s.Free(0, x) // the previous batch, released when x is rebound
			}
			x = nx
			saved, logits := m.forward(x, leak, 41, "evaluate")
			if prevLogits != 0 {
				s.Free(0, prevLogits)
				prevLogits = 0
			}
			ls := s.Alloc(0, c.Tokens*4, m.user(42, "evaluate", s.F("torch/nn/functional.py", 3494, "cross_entropy"))) // log-softmax denominators
			loss := s.Alloc(0, 4, m.user(42, "evaluate", s.F("torch/nn/functional.py", 3494, "cross_entropy")))
			if leak {
				// total_loss = total_loss + loss: a new scalar each step; the
				// old one dies (AddBackward saves nothing), but every step's
				// graph hangs on the new one, with everything it saved (the
				// ids and activations in saved, the logits, ls) and the
				// loss: none of them is ever freed.
				nt := s.Alloc(0, 4, m.user(43, "evaluate"))
				if total != 0 {
					s.Free(0, total)
				}
				total = nt
				return
			}
			_ = saved // empty under no_grad
			s.Free(0, ls)
			s.Free(0, loss) // loss.item() copies to the host; the tensor dies
			prevLogits = logits
		})
	}
	return s
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
	m := newLeakModel(s, c, "train.py")
	var prevLogits, prevX, history uint64
	var cycle []uint64
	for step := 1; step <= c.Steps; step++ {
		m.step(step, func() {
			m.zeroGrad()
			x := s.Alloc(0, c.Tokens*8, m.user(90, "<module>"))
			if prevX != 0 {
				s.Free(0, prevX)
			}
			prevX = x
			if f.retainGraph {
				prevX = 0 // the embedding of the kept graph saved the ids
			}
			saved, logits := m.forward(x, true, 92, "<module>")
			saved = saved[1:] // the ids stay referenced by the loop variable
			if prevLogits != 0 {
				s.Free(0, prevLogits) // the previous step's logits, released on rebinding
				prevLogits = 0
			}
			if f.growScratch > 0 {
				// attention scratch of a longer sequence every step: the
				// cache cannot reuse the last one and reserves a new segment.
				t := s.Alloc(0, 4*c.ActivationBytes()+int64(step)*f.growScratch, m.at(64, "attention", 92, "<module>"))
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
				cycle = append(cycle, s.Alloc(0, 2*c.ActivationBytes(), m.at(96, "forward", 92, "<module>")))
			}
			ls := s.Alloc(0, c.Tokens*4, m.user(93, "<module>", s.F("torch/nn/functional.py", 3494, "cross_entropy")))
			loss := s.Alloc(0, 4, m.user(93, "<module>", s.F("torch/nn/functional.py", 3494, "cross_entropy")))
			saved = append(saved, ls)
			if f.retainGraph {
				m.backwardRetained()
			} else {
				m.backward(saved)
			}
			if f.growCat {
				n := int64(step) * c.ActivationBytes()
				nh := s.Alloc(0, n, m.user(101, "<module>")) // torch.cat: no Python frame of its own
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
	return s
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
