package snapshottest

// This file holds the evaluation-loop leak scenarios.

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
