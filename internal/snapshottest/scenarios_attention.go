package snapshottest

import "fmt"

// EagerConfig is a training run of a transformer whose attention is
// written out (transformers' eager_attention_forward, or a course's own
// scaled_dot_product_attention): the tensors with two sequence dimensions
// (scores, their scaling, softmax) beside per-token ones made by the same
// attention code (repeated keys and values, the output).
type EagerConfig struct {
	Layers  int
	Hidden  int64
	Heads   int64
	KVHeads int64 // grouped-query heads (repeated to Heads in attention code); 0: Heads
	Seq     int64
	Batch   int64
	Vocab   int64
	Steps   int
	// Frames is how the stacks look: "module" (a library model: module.py
	// frames, the attention in eager_attention_forward) or "user" (a
	// model written as functions, the attention in
	// scaled_dot_product_attention, no module frames). Backward has no
	// Python frames.
	Frames string
}

// Describe is a one-line description of the config, for test names.
func (c EagerConfig) Describe() string {
	return fmt.Sprintf("%s frames, %d layers, hidden %d, %d/%d heads, seq %d, batch %d", c.Frames, c.Layers, c.Hidden, c.Heads, c.kvHeads(), c.Seq, c.Batch)
}

func (c EagerConfig) kvHeads() int64 {
	if c.KVHeads == 0 {
		return c.Heads
	}
	return c.KVHeads
}

// EagerTrain simulates such a run, fp32, with AdamW: the parameters exist
// before recording; each step's forward keeps, per layer, the norm output,
// q, k, v, the repeated k and v, the softmax of the scores and the
// attention output (the scores and their scaled copy are freed), the MLP;
// the loss keeps its log-softmax; backward frees layer by layer, making the
// gradients of the scores (seq²) and of the per-token tensors without
// frames, and the parameters' gradients.
func EagerTrain(c EagerConfig) *Sim {
	s := NewSim()
	const fp = 4
	hd := c.Hidden / c.Heads
	q, kv := c.Heads*hd, c.kvHeads()*hd
	h, f := c.Hidden, 4*c.Hidden
	var fwd func(line int, name string) *List
	attnName := "eager_attention_forward"
	switch c.Frames {
	case "user":
		attnName = "scaled_dot_product_attention"
		model := s.F("train.py", 40, "<module>")
		fwd = func(line int, name string) *List {
			return s.Stack(s.F("model.py", line, name), s.F("model.py", 200, "transformer"), model)
		}
	default:
		call := s.F("torch/nn/modules/module.py", 1787, "_call_impl")
		wrapped := s.F("torch/nn/modules/module.py", 1776, "_wrapped_call_impl")
		train := s.F("train.py", 40, "<module>")
		fwd = func(line int, name string) *List {
			return s.Stack(s.F("modeling_x.py", line, name), s.F("modeling_x.py", 300, "forward"), call, wrapped,
				s.F("modeling_x.py", 400, "forward"), call, wrapped, train)
		}
	}
	attn := func(line int) *List { return fwd(line, attnName) }
	build := s.Stack(s.F("torch/nn/modules/linear.py", 106, "__init__"), s.F("model.py", 31, "__init__"), s.F("train.py", 20, "<module>"))
	s.NoTrace = true
	var params []int64
	for l := 0; l < c.Layers; l++ {
		for _, n := range []int64{h * q, h * kv, h * kv, q * h, h * f, f * h} {
			params = append(params, n*fp)
			s.Alloc(0, n*fp, build)
		}
	}
	params = append(params, c.Vocab*h*fp)
	s.Alloc(0, c.Vocab*h*fp, build)
	s.NoTrace = false
	var grads, state []uint64
	for step := 1; step <= c.Steps; step++ {
		tokens := c.Batch * c.Seq
		z := c.Batch * c.Heads * c.Seq * c.Seq * fp
		s.Annotate(0, "Optimizer.zero_grad#AdamW.zero_grad", func() {
			for _, g := range grads {
				s.Free(0, g)
			}
			grads = nil
		})
		x := s.Alloc(0, tokens*8, s.Stack(s.F("train.py", 41, "<module>")))
		var saved []uint64
		keep := func(n int64, st *List) { saved = append(saved, s.Alloc(0, n, st)) }
		for l := 0; l < c.Layers; l++ {
			keep(tokens*h*fp, fwd(60, "forward"))  // norm output
			keep(tokens*q*fp, fwd(62, "forward"))  // q
			keep(tokens*kv*fp, fwd(63, "forward")) // k
			keep(tokens*kv*fp, fwd(64, "forward")) // v
			if kv < q {
				keep(tokens*q*fp, attn(70)) // repeated k
				keep(tokens*q*fp, attn(70)) // repeated v
			}
			scores := s.Alloc(0, z, attn(72)) // q·kᵀ
			scaled := s.Alloc(0, z, attn(72)) // / √d
			s.Free(0, scores)
			keep(z, attn(74)) // softmax
			s.Free(0, scaled)
			keep(tokens*q*fp, attn(76))           // the output (per token)
			keep(tokens*h*fp, fwd(80, "forward")) // output projection
			keep(tokens*f*fp, fwd(82, "forward")) // MLP hidden
			keep(tokens*f*fp, fwd(83, "forward")) // MLP activation
			s.Tick(100)
		}
		lsm := s.Alloc(0, tokens*c.Vocab*fp, s.Stack(s.F("torch/nn/functional.py", 3494, "cross_entropy"), s.F("train.py", 43, "<module>")))
		// Backward: no Python frames. The loss's gradient, then each layer
		// in reverse: a gradient of each saved tensor's size, the saved
		// tensor freed after it, the weights' gradients.
		g := s.Alloc(0, tokens*c.Vocab*fp, nil)
		s.Free(0, lsm)
		s.Free(0, g)
		grads = append(grads, s.Alloc(0, params[len(params)-1], nil))
		perLayer := 6
		for l := c.Layers - 1; l >= 0; l-- {
			n := len(saved) / (l + 1)
			for i := len(saved) - 1; i >= len(saved)-n; i-- {
				tmp := s.Alloc(0, s.dev(0).live[saved[i]].req, nil)
				s.Free(0, saved[i])
				s.Free(0, tmp)
			}
			saved = saved[:len(saved)-n]
			for k := 0; k < perLayer; k++ {
				grads = append(grads, s.Alloc(0, params[l*perLayer+k], nil))
			}
			s.Tick(20)
		}
		s.Free(0, x)
		s.Annotate(0, "Optimizer.step#AdamW.step", func() {
			if state == nil {
				init := s.Stack(s.F("torch/optim/adamw.py", 174, "_init_group"), s.F("torch/optim/adamw.py", 209, "step"), s.F("train.py", 45, "<module>"))
				for _, p := range params {
					state = append(state, s.Alloc(0, p, init), s.Alloc(0, p, init))
				}
			}
		})
		s.Tick(1000)
	}
	return s
}
