package snapshottest

// This file holds the training-loop leak scenarios: healthy, growing list,
// reference cycle, torch.cat growth, retain_graph and reserved drift.

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
