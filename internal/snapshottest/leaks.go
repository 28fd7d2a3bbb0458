package snapshottest

// This file sizes the leak scenarios (LeakConfig). Their model is in
// leaks_model.go and leaks_passes.go, the loops in leaks_eval.go and
// leaks_train.go.

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
	// NoAnnotations records no Optimizer.step/zero_grad annotations, as
	// PyTorch before 2.5 (no external_annotations) or a training thread
	// other than the one that started the recording (the annotation
	// callback is thread-local) writes the file.
	NoAnnotations bool
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
