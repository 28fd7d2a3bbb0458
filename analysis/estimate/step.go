package estimate

// Phases of a step whose memory the estimate compares; the peak is the
// largest.
const (
	// PhaseBackward is the start of backward: every block's saved
	// tensors, the loss's float32 buffers and autocast's weight copies,
	// with the optimizer state of the steps before (no gradient yet:
	// zero_grad(set_to_none=True) freed them).
	PhaseBackward = "backward"
	// PhaseRecompute is gradient checkpointing's backward of the last
	// block or of the first: the checkpoints (or the gradients) and one
	// block recomputed with its backward scratch.
	PhaseRecompute = "backward (recompute)"
	// PhaseBackwardEnd is the backward of the first block: every
	// gradient, its saved tensors and scratch.
	PhaseBackwardEnd = "backward (end)"
	// PhaseOptimizer is the optimizer step: weights, gradients, state and
	// the step's scratch (the first step allocates the state there).
	PhaseOptimizer = "optimizer"
	// PhaseForward is inference: the largest working set of a forward
	// (of the prompt, in a generation, with its KV cache).
	PhaseForward = "forward"
	// PhaseGenerate is a generation's last token: the KV cache of every
	// token and the last logits.
	PhaseGenerate = "generation"
)

// PhasePeak is the estimated memory at one moment of a step.
type PhasePeak struct {
	Phase string `json:"phase"`
	Bytes int64  `json:"bytes"`
	// Parts is what is live then, by name (in output order).
	Parts []Part `json:"parts"`
}

// Part is a named amount of memory of a phase.
type Part struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// phase builds a PhasePeak from its parts, the empty ones left out.
func phase(name string, parts ...Part) PhasePeak {
	p := PhasePeak{Phase: name, Parts: []Part{}}
	for _, pt := range parts {
		if pt.Bytes != 0 {
			p.Parts = append(p.Parts, pt)
			p.Bytes += pt.Bytes
		}
	}
	return p
}

// cuBLAS workspace per handle: 32 MiB on Hopper and later (measured:
// H200, PyTorch 2.11), PyTorch's default of 4096 KiB × 2 + 16 KiB × 8
// before.
const (
	workspaceHopper = 32 << 20
	workspaceOlder  = 4096<<10*2 + 16<<10*8
)

// workspaces is what cuBLAS's handles take from the caching allocator: one
// for the thread that runs forward, one for autograd's in training. An
// unknown GPU counts Hopper's size.
func workspaces(g *GPU, training bool) int64 {
	per := int64(workspaceHopper)
	if g != nil && g.Arch != "" && g.Arch != "hopper" && g.Arch != "blackwell" {
		per = workspaceOlder
	}
	if training {
		return 2 * per
	}
	return per
}

// weightCopies is the bytes of autocast's 16-bit copies of the fp32
// weights its matmuls use: the blocks' linear weights and biases and the
// head (the embedding's when tied), and one block's of them. Autocast
// caches only weights that train (a frozen base is cast at each use and
// not kept).
func weightCopies(a *Arch, s Setup) (all, block int64) {
	if !s.AMP || s.LoRARank > 0 {
		return 0, 0
	}
	for _, t := range a.Tensors() {
		switch {
		case t.Linear || t.PerLayer && isBias(t.Name):
			all += 2 * t.Elements()
			block += 2 * t.Rows * t.Cols
		case t.Name == "lm_head" || a.Tied && t.Name == "embed_tokens":
			all += 2 * t.Elements()
		}
	}
	return all, block
}

func isBias(name string) bool {
	return len(name) > 5 && name[len(name)-5:] == "_bias"
}

// optimizerScratch is the optimizer step's temporary memory: PyTorch's
// AdamW (foreach, its default on CUDA) makes one tensor per parameter in
// the state's dtype (the square root of exp_avg_sq), all at once —
// measured, 100% of the trainable bytes; a loop over the parameters
// (foreach=False) makes two for one parameter at a time (the square root
// and its quotient), so twice the largest tensor. Fused and 8-bit
// optimizers, SGD, DeepSpeed's and Megatron's optimizers (--mixed, ZeRO)
// and offloaded steps update in place.
func optimizerScratch(in Inputs, trainable int64) int64 {
	s := in.Setup
	if s.Mixed || s.ZeRO > 0 || s.Offload {
		return 0
	}
	switch s.Optimizer {
	case "adamw":
		return trainable * s.stateBytes()
	case "adamw-loop":
		return 2 * largestTrainable(in) * s.stateBytes()
	}
	return 0
}

// largestTrainable is the element count of the largest trainable tensor
// (a LoRA adapter's A or B; the whole count without the shapes).
func largestTrainable(in Inputs) int64 {
	a := in.Arch
	if a == nil || in.Params > 0 {
		return in.Params
	}
	var n int64
	for _, t := range a.Tensors() {
		switch {
		case in.LoRARank > 0 && t.Linear:
			n = max(n, in.LoRARank*max(t.Rows, t.Cols))
		case in.LoRARank == 0:
			n = max(n, t.Rows*t.Cols)
		}
	}
	return n
}

// stepParts are the activation terms of a step, in bytes.
type stepParts struct {
	blocks, scores, outside int64 // kept for backward, all blocks; their seq² part; outside them
	block, blockScores      int64 // one block's kept tensors (with its scores)
	checkpoints             int64 // gradient checkpointing: the blocks' inputs
	scratch                 int64 // one block's backward scratch
	loss                    int64 // the loss's float32 buffers at the start of backward
	copies, blockCopies     int64 // autocast's weight copies: all, one block's
}

// parts computes the activation terms of a training step.
func parts(a *Arch, s Setup) stepParts {
	tokens := s.Batch * s.Seq
	perToken, perScore := blockKept(a, s)
	var p stepParts
	p.blockScores = perScore * s.Batch * a.Heads * s.Seq * s.Seq
	p.block = tokens*perToken.eval() + p.blockScores
	p.outside = tokens * outsideKept(a, s).eval()
	p.scratch = tokens * blockScratch(a, s).eval()
	p.loss = lossBytesPerLogit * tokens * a.Vocab
	p.copies, p.blockCopies = weightCopies(a, s)
	if s.Checkpointing == "full" {
		p.checkpoints = a.Layers * tokens * a.Hidden * s.compute().residual()
		p.scores = p.blockScores
	} else {
		p.blocks = a.Layers * p.block
		p.scores = a.Layers * p.blockScores
	}
	return p
}

// stepPeaks estimates every phase of the step and sets the peak, the
// activation parts and the phases of r.
func stepPeaks(in Inputs, r *Result) {
	s, a := in.Setup, in.Arch
	r.WorkspaceBytes = workspaces(in.GPU, s.training())
	// states: a fresh slice per phase (phase lists append to it).
	states := func() []Part {
		return []Part{{"parameters", r.ParametersBytes}, {"master weights", r.MasterWeightsBytes}}
	}
	state := Part{"optimizer state", r.OptimizerStateBytes}
	ws := Part{"workspaces", r.WorkspaceBytes}
	gathered := Part{"gathered block", r.WorkingBytes}
	if !s.training() {
		inferencePeak(in, r, states(), ws, gathered)
		return
	}
	r.OptimizerStepBytes = optimizerScratch(in, r.TrainableParameterCount)
	grads := Part{"gradients", r.GradientsBytes}
	opt := phase(PhaseOptimizer, append(states(), grads, state, Part{"step scratch", r.OptimizerStepBytes}, ws)...)
	if a == nil {
		// Without the architecture the activations are unknown: the
		// optimizer step is all that can be counted.
		bwd := phase(PhaseBackward, append(states(), state, ws, gathered)...)
		setPeak(r, bwd, opt)
		return
	}
	p := parts(a, s)
	act := p.blocks + p.checkpoints + p.outside
	r.ActivationsBytes, r.AttentionBytes = &act, &p.scores
	r.LogitsBytes = p.loss
	copies := p.copies
	if s.Checkpointing == "full" {
		copies = p.copies - a.Layers*p.blockCopies // the head's copy only: the blocks' die with autocast's region
	}
	r.AutocastCacheBytes = copies
	kept := Part{"activations", act}
	loss := Part{"loss buffers", p.loss}
	cache := Part{"autocast copies", copies}
	phases := []PhasePeak{
		phase(PhaseBackward, append(states(), state, ws, gathered, kept, cache, loss)...),
		phase(PhaseBackwardEnd, append(states(), grads, state, ws, gathered,
			Part{"block", p.block + p.scratch + p.checkpoints/max(a.Layers, 1)},
			Part{"block copies", p.blockCopies})...),
		opt,
	}
	if s.Checkpointing == "full" {
		var headGrad int64 // the head's gradient, made first in backward
		if s.LoRARank == 0 && r.TrainableParameterCount > 0 {
			headGrad = r.GradientsBytes / r.TrainableParameterCount * a.Vocab * a.Hidden
		}
		phases = append(phases, phase(PhaseRecompute, append(states(), state, ws, gathered,
			Part{"checkpoints", p.checkpoints}, Part{"head gradients", min(headGrad, r.GradientsBytes)},
			Part{"block recompute", p.block + p.scratch},
			Part{"block copies", p.blockCopies})...))
	}
	setPeak(r, phases...)
}

// inferencePeak is a forward without autograd: the weights, the largest
// working set (a block's MLP or attention, or the head's logits) and, in a
// generation, the KV cache — the prompt's at its forward, the whole
// generation's at its end.
func inferencePeak(in Inputs, r *Result, states []Part, ws, gathered Part) {
	s, a := in.Setup, in.Arch
	if a == nil {
		setPeak(r, phase(PhaseForward, append(states, ws, gathered)...))
		return
	}
	c := s.compute()
	el := c.elem()
	tokens := s.Batch * s.Seq
	q, kv := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	// The model's forward holds the embedding's output to its end and its
	// layer loop holds each block's input; inside a block the sum after
	// attention and a norm's output join them. At the head: the embedding's
	// output, the last block's and the final norm's.
	headPerToken := a.Hidden * (2*c.residual() + el)
	stream := tokens * (headPerToken + a.Hidden*c.residual())
	headStream := tokens * headPerToken
	block := max(tokens*inferenceMLP(a, c)*a.FFN, tokens*(2*q+2*kv)*el)
	var scores int64
	if backendOf(a, s) != backendFused {
		scores = s.Batch * a.Heads * s.Seq * s.Seq * eagerInferenceScores(a, s)
	}
	logits := tokens * a.Vocab * el
	lastLogits := s.Batch * a.Vocab * (el + 4) // generate(): the last position's logits, and their fp32 copy
	kvLayer := func(n int64) int64 { return 2 * s.Batch * kv * n * el }
	if s.NewTokens > 0 {
		logits = lastLogits
	}
	act := max(stream+block+scores, headStream+logits)
	r.ActivationsBytes, r.AttentionBytes = &act, &scores
	r.LogitsBytes = logits
	// The cache holds every token the model has read: the prompt and all
	// new tokens but the last, which is returned and never read back.
	// A static cache is allocated at its full length before the prompt.
	cached := s.Seq + s.NewTokens - 1
	promptCache := s.Seq
	if s.StaticCache {
		promptCache = cached
	}
	prompt := phase(PhaseForward, append(states, ws, gathered,
		Part{"KV cache", boolBytes(s.NewTokens > 0, a.Layers*kvLayer(promptCache))}, Part{"working set", act})...)
	if s.NewTokens == 0 {
		setPeak(r, prompt)
		return
	}
	// The last new token read: the cache of every token, one layer's keys
	// or values twice while a dynamic cache concatenates, the logits.
	r.KVCacheBytes = a.Layers * kvLayer(cached)
	growing := kvLayer(cached) / 2
	if s.StaticCache {
		growing = 0
	}
	decode := phase(PhaseGenerate, append(states, ws, gathered,
		Part{"KV cache", r.KVCacheBytes + growing}, Part{"working set", lastLogits + s.Batch*headPerToken})...)
	setPeak(r, prompt, decode)
}

// inferenceMLP is the bytes per token and MLP channel a block's MLP holds
// at once without autograd: a gated MLP its activation, the up projection
// and their product; GPT-2's gelu_new, written in Python ops, its input,
// half of it and two intermediates of the tanh chain; other MLPs the
// projection's output and the activation's.
func inferenceMLP(a *Arch, c computeKind) int64 {
	el := c.elem()
	switch {
	case a.Gated:
		return 3 * el
	case a.Family == FamilyGPT2 && !a.fusedGELU():
		return 4 * el
	}
	return 2 * el
}

// eagerInferenceScores is the bytes per attention score transformers'
// eager attention holds at once without autograd: the masked scores and
// the fp32 softmax output, plus, for bf16 scores, the fp32 copy softmax
// makes of its input first (half precision has a direct kernel and fp32
// needs no copy). GPT-2's eager code runs softmax in the scores' own
// dtype: the masked scores and the softmax output.
func eagerInferenceScores(a *Arch, s Setup) int64 {
	el := s.compute().elem()
	switch {
	case a.Family == FamilyGPT2 || el == 4:
		return 2 * el
	case s.Precision == "fp16":
		return el + 4 + el // the masked scores, the fp32 output and its 16-bit cast
	}
	return el + 4 + 4
}

func boolBytes(b bool, n int64) int64 {
	if b {
		return n
	}
	return 0
}

// setPeak records the phases and the largest of them.
func setPeak(r *Result, phases ...PhasePeak) {
	r.Phases = phases
	for i, p := range phases {
		if i == 0 || p.Bytes > r.TotalBytes {
			r.TotalBytes, r.PeakPhase = p.Bytes, p.Phase
		}
	}
}

// stepBound is an upper bound of the step's activation bytes in float64
// (no overflow): what check refuses beyond any device.
func stepBound(a *Arch, s Setup) float64 {
	tokens := float64(s.Batch) * float64(s.Seq)
	h, f, q := float64(a.Hidden), float64(max(a.FFN, a.Hidden)), float64(a.Heads*max(a.HeadDim, 1))
	r := float64(s.LoRARank)
	perToken := 64*h + 32*f + 32*q + 8*float64(a.Heads) + 32*r + 64
	scores := 16 * float64(a.Heads) * float64(s.Seq) * tokens
	kv := 4 * float64(a.Layers) * float64(s.Batch) * q * float64(s.Seq+s.NewTokens)
	return float64(a.Layers+1)*(tokens*perToken+scores) + 16*tokens*float64(a.Vocab) + kv
}
