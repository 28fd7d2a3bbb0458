package snapshottest

import "fmt"

// This file runs the passes of the leak scenarios' model: forward, backward,
// zero_grad, the optimizer step and the step ranges around them.

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
		m.grads = append(m.grads, m.weightGrad(i, bwd))
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
		m.grads = append(m.grads, m.weightGrad(i, bwd))
		s.Tick(20)
	}
}

// weightGrad makes the gradient of parameter i at stack st. Under autocast
// the matmul's backward computes the gradient of the weight's 16-bit copy
// (half the weight's bytes), which the copy's ToCopyBackward0 casts to the
// fp32 gradient; the 16-bit one is freed right after.
func (m *leakModel) weightGrad(i int, st *List) uint64 {
	if !m.c.Autocast {
		return m.s.Alloc(0, m.params[i], st)
	}
	g16 := m.s.Alloc(0, m.params[i]/2, st)
	g := m.s.Alloc(0, m.params[i], m.stack("backward: ToCopyBackward0"))
	m.s.Free(0, g16)
	return g
}

// zeroGrad frees the gradients (set_to_none=True).
func (m *leakModel) zeroGrad() {
	m.annotate("Optimizer.zero_grad#AdamW.zero_grad", func() {
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
	m.annotate("Optimizer.step#AdamW.step", func() {
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

// annotate runs fn inside the record_function range name, which the file
// holds unless the configuration records no annotations.
func (m *leakModel) annotate(name string, fn func()) {
	if m.c.NoAnnotations {
		fn()
		return
	}
	m.s.Annotate(0, name, fn)
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
