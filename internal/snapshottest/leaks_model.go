package snapshottest

// This file holds the model of the leak scenarios: its parameters, the
// stacks of its allocations and autocast's weight cache.

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
