package snapshottest

// loopShape arranges the loops of an evaluation function around the
// evaluation loop of EvalLoop (eval.py:38–43):
//
//	def evaluate(model, loader):
//	    for _ in range(warmup):                  # eval.py:29
//	        xw = torch.randint(…, device="cuda")  # eval.py:30
//	        model(xw)                            # eval.py:31 (no_grad)
//	    for epoch in range(epochs):              # eval.py:34
//	        correct = torch.zeros((), device=…)  # eval.py:35
//	        for x, y in loader:                  # eval.py:37
//	            …                                # eval.py:38–43
//
// Warm-up > 0 puts a loop before the evaluation loop in the same function
// (two sequential loops); Epochs > 1 nests the evaluation loop in an
// epoch loop (LeakConfig.Steps batches in all, split evenly).
type loopShape struct {
	warmup int
	epochs int
}

// warmUp runs the warm-up loop: iterations of a forward under no_grad on a
// random batch, nothing kept.
func (sh loopShape) warmUp(m *leakModel) {
	s := m.s
	for k := 0; k < sh.warmup; k++ {
		xw := s.Alloc(0, m.c.Tokens*8, m.user(30, "randint"))
		_, logits := m.forward(xw, false, m.outer(31))
		for _, b := range m.exitAutocast(false) {
			s.Free(0, b)
		}
		s.Free(0, logits)
		s.Free(0, xw)
		s.Tick(1000)
	}
}

// epochStart starts an epoch before batch step (from 1) when one begins
// there: the epoch's counter (eval.py:35) replaces the previous one.
func (sh loopShape) epochStart(m *leakModel, step int, prev uint64) uint64 {
	if sh.epochs < 2 {
		return prev
	}
	per := max(1, m.c.Steps/sh.epochs)
	if (step-1)%per != 0 {
		return prev
	}
	c := m.s.Alloc(0, 4, m.user(35, "zeros"))
	if prev != 0 {
		m.s.Free(0, prev)
	}
	return c
}

// EvalEpochs is EvalLoop nested in an epoch loop (for epoch in
// range(epochs): … for x, y in loader: …): Config.Steps batches in all.
// The steps are the batches (the loop that runs the model once per
// iteration), never the epochs.
func EvalEpochs(c LeakConfig, epochs int, leak bool) *Sim {
	return evalLoop(c, leak, false, loopShape{epochs: epochs})
}

// WarmupThenEval is EvalLoop after a warm-up loop of warmup forwards in the
// same function: two sequential loops, the steps the evaluation loop's
// iterations (the longer loop), never one loop made of both.
func WarmupThenEval(c LeakConfig, warmup int, leak bool) *Sim {
	return evalLoop(c, leak, false, loopShape{warmup: warmup})
}

// TrainThenEval is a training loop followed by an evaluation loop in one
// function (def fit(): …, train.py):
//
//	for x, y in train_loader:                # train.py:90–101, as trainLoop
//	    …
//	for x, y in val_loader:                  # train.py:110
//	    logits = model(x)                    # train.py:113
//	    loss = F.cross_entropy(logits, y)    # train.py:114
//	    total_loss += loss                   # train.py:115
//
// Config.Steps training steps (numbered 1…Steps), then Config.Steps
// evaluation iterations (Steps+1…2·Steps), as EvalLoop: with leak under
// grad mode, every iteration's graph kept through total_loss (the
// retained_graph of the model's call at train.py:113 fit); without, under
// no_grad with .item().
func TrainThenEval(c LeakConfig, leak bool) *Sim {
	m := newLeakModel(NewSim(), c, "train.py", "fit")
	m.trainSteps(trainFault{})
	m.evalSteps(leak, false, loopShape{}, 110, c.Steps+1)
	return m.s
}
