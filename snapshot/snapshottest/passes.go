package snapshottest

// ForwardPass simulates a benchmark script that runs one forward pass of
// the model and dumps the snapshot while its output is still alive
// (bench.py):
//
//	optimizer.zero_grad()                  # bench.py:92 (an annotation, no event)
//	x = batch.to("cuda")                   # bench.py:95
//	with torch.autocast("cuda", ...):      # bench.py:98, when Autocast
//	    out = model(x)                     # bench.py:100
//	    loss = F.cross_entropy(out, y)     # bench.py:101
//	    torch.cuda.memory._dump_snapshot() # bench.py:104
//
// Under grad mode the graph (every saved activation, and under autocast the
// weight copies it saved) is alive at the dump; under no_grad only the
// output, the loss and autocast's weight cache are. There is one pass: no
// steps, and nothing leaks. Layers, Stacks and Autocast vary it;
// Config.Steps is ignored.
func ForwardPass(c LeakConfig, grad bool) *Sim {
	m := newLeakModel(NewSim(), c, "bench.py", "main")
	s := m.s
	s.Annotate(0, "Optimizer.zero_grad#AdamW.zero_grad", func() {})
	x := s.Alloc(0, c.Tokens*8, m.user(95, "_to_copy"))
	saved, logits := m.forward(x, grad, m.outer(100))
	ce := s.F("torch/nn/functional.py", 3494, "cross_entropy")
	s.Alloc(0, c.Tokens*4, m.user(101, "log_softmax", ce))
	s.Alloc(0, 4, m.user(101, "nll_loss", ce))
	_, _ = saved, logits // alive at the dump
	return s
}
