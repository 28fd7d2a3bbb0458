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

// Generate simulates text generation with a key/value cache, as
// transformers' generate runs it under no_grad (gen.py:30 calls
// model.generate; its _sample loop at generation/utils.py:2700–2740 runs
// the model on one new token per iteration, Config.Steps of them, after a
// prompt of Config.Tokens). Each layer's cache (cache_utils.py
// DynamicCache.update) is replaced by one a token longer every iteration
// (torch.cat), and so are the input ids: allocated memory grows by the
// cache's row each step — expected, not a leak. Layers and Stacks vary it.
func Generate(c LeakConfig) *Sim {
	m := newLeakModel(NewSim(), c, "gen.py", "main")
	s := m.s
	gu := sitePackages + "transformers/generation/utils.py"
	loop := func(line int) []*Dict {
		return []*Dict{s.F(gu, line, "_sample"), s.F(gu, 2215, "generate"),
			s.F(sitePackages+"torch/utils/_contextlib.py", 116, "decorate_context"), s.F("gen.py", 30, "main"), s.F("gen.py", 60, "<module>")}
	}
	h := c.Hidden
	ids := s.Alloc(0, c.Tokens*8, m.user(28, "_to_copy"))
	cache := make([]uint64, 2*c.Layers)
	n := c.Tokens
	for step := 1; step <= c.Steps; step++ {
		m.step(step, func() {
			pos := s.Alloc(0, 8, m.stack("arange", append([]*Dict{s.F(sitePackages+"transformers/models/llama/modeling_llama.py", 1300, "prepare_inputs_for_generation")}, loop(2700)...)...))
			outer := loop(2710)
			x := s.Alloc(0, h*4, m.top(135, "embedding", outer, s.F("torch/nn/functional.py", 2551, "embedding"), s.F("torch/nn/modules/sparse.py", 190, "forward"), m.call, m.wrap))
			for l := 0; l < c.Layers; l++ {
				ln := s.Alloc(0, h*4, m.at(60, "forward", "layer_norm", outer))
				qkv := s.Alloc(0, 3*h*4, m.at(62, "forward", "addmm", outer, m.linear, m.call, m.wrap))
				upd := m.at(64, "attention", "cat", outer, s.F(sitePackages+"transformers/cache_utils.py", 450, "update"))
				for kv := 0; kv < 2; kv++ { // the key and value caches, a token longer
					nc := s.Alloc(0, (n+1)*h*4, upd)
					if cache[2*l+kv] != 0 {
						s.Free(0, cache[2*l+kv])
					}
					cache[2*l+kv] = nc
				}
				scores := s.Alloc(0, (n+1)*4, m.at(65, "attention", "softmax", outer))
				out := s.Alloc(0, h*4, m.at(66, "forward", "addmm", outer, m.linear, m.call, m.wrap))
				mlp := s.Alloc(0, 4*h*4, m.at(70, "forward", "addmm", outer, m.linear, m.call, m.wrap))
				nx := s.Alloc(0, h*4, m.at(72, "forward", "add", outer))
				for _, b := range []uint64{ln, qkv, scores, out, mlp, x} {
					s.Free(0, b)
				}
				x = nx
				s.Tick(50)
			}
			logits := s.Alloc(0, c.Vocab*4, m.top(150, "addmm", outer, m.linear, m.call, m.wrap))
			s.Free(0, x)
			next := s.Alloc(0, 8, m.stack("argmax", loop(2730)...))
			nids := s.Alloc(0, (n+1)*8, m.stack("cat", loop(2740)...))
			s.Free(0, ids)
			ids = nids
			for _, b := range []uint64{logits, next, pos} {
				s.Free(0, b)
			}
			n++
		})
	}
	return s
}
