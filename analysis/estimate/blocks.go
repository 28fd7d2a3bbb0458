package estimate

// computeKind is how a step computes: the element size of its matmuls and
// where its tensors are 32-bit.
type computeKind int

const (
	computeFP32 computeKind = iota // fp32 weights, fp32 compute
	computeAMP                     // fp32 weights, 16-bit compute under torch.autocast
	computeHalf                    // 16-bit weights and compute (bf16/fp16, a DeepSpeed/Megatron mixed model, a quantized base)
)

func (s *Setup) compute() computeKind {
	switch {
	case s.AMP:
		return computeAMP
	case s.Precision == "fp32":
		return computeFP32
	}
	return computeHalf
}

// elem is the element size of the matmuls' outputs.
func (c computeKind) elem() int64 {
	if c == computeFP32 {
		return 4
	}
	return 2
}

// residual is the element size of the residual stream: fp32 under
// autocast too (the embedding's output and the additions stay fp32).
func (c computeKind) residual() int64 {
	if c == computeHalf {
		return 2
	}
	return 4
}

// Attention implementations, by --attention.
var Attentions = []string{"sdpa", "eager", "flash"}

// backend is the attention kernel a step runs: fused kernels keep no
// scores.
type backend int

const (
	backendFused backend = iota // FlashAttention, SDPA's flash / memory-efficient / cuDNN kernels
	backendMath                 // SDPA's math fallback: materialises the scores
	backendEager                // transformers' eager_attention_forward
)

// backendOf is the kernel of a setup. transformers' default is SDPA; in
// PyTorch 2.11 SDPA runs a fused kernel for 16-bit inputs, the memory-
// efficient kernel for fp32 multi-head attention, and its math fallback
// for fp32 grouped-query attention (enable_gqa is supported by the flash
// and math kernels only, and flash has no fp32): measured, a Llama of 16
// query and 4 KV heads in fp32 keeps the scores of every layer.
func backendOf(a *Arch, s Setup) backend {
	switch {
	case s.Attention == "eager":
		return backendEager
	case s.Attention == "flash":
		return backendFused
	case s.compute() == computeFP32 && a.KVHeads < a.Heads:
		return backendMath
	}
	return backendFused
}

// blockKept is what one transformer block keeps for its backward:
// perToken bytes for each of the batch × sequence tokens and perScore
// bytes for each of the batch × heads × seq² attention scores. It counts
// the tensors transformers' code (5.x) and PyTorch's autograd (2.11)
// save, by precision; measured on snapshots of Llama- and GPT-2-shaped
// models, tensor by tensor, and on the peaks of measure_matrix.py.
func blockKept(a *Arch, s Setup) (perToken expr, perScore int64) {
	d := dimsOf(a, s)
	c := s.compute()
	be := backendOf(a, s)
	if a.Family == FamilyGPT2 {
		perToken = gpt2Block(a, s, d, c)
	} else {
		perToken = llamaBlock(a, s, d, c)
	}
	perToken = perToken.plus(attentionCore(a, s, d, c, be))
	switch be {
	case backendMath:
		perScore = 4 // the softmax of the scores, fp32
	case backendEager:
		perScore = eagerScores(a, s, c)
	}
	if s.Checkpointing == "selective" {
		perScore = 0 // the attention core is recomputed
	}
	return perToken, perScore
}

// norm is what an RMSNorm of width sym keeps: the reciprocal root of each
// row (4 bytes a row), the normalised input in fp32, and — when the norm's
// weight trains — its 16-bit normalised input and output (the latter is
// the next linears' saved input; under autocast they save casts instead,
// counted with the linears).
func norm(e expr, d dims, c computeKind, sym string, rows string, frozen bool) expr {
	rowBytes := func(e expr) expr {
		if rows == "" {
			return e.add(d, 4, "")
		}
		return e.add(d, 4, rows)
	}
	e = rowBytes(e)
	switch {
	case c == computeFP32 && !frozen:
		return e.add(d, 8, sym) // x·rsqrt, weight·x
	case c == computeFP32, c == computeAMP:
		return e.add(d, 4, sym) // x·rsqrt (fp32)
	case frozen:
		return e.add(d, 4, sym) // the fp32 copy of the input
	}
	return e.add(d, 8, sym) // fp32 copy, 16-bit normalised, output
}

// llamaBlock is a Llama-family block but its attention core: two RMSNorms,
// the residual stream, the MLP, and what the linears save.
func llamaBlock(a *Arch, s Setup, d dims, c computeKind) expr {
	var e expr
	lora := s.LoRARank > 0
	e = norm(e, d, c, "h", "", lora)
	e = norm(e, d, c, "h", "", lora)
	if a.QKNorm {
		e = norm(e, d, c, "q", "a", lora)
		e = norm(e, d, c, "kv", "k", lora)
	}
	if c != computeHalf {
		e = e.add(d, 2*4, "h") // the two residual sums (fp32); in 16-bit the norms keep fp32 copies instead
	}
	el := c.elem()
	mlp := int64(4) // gate and up outputs, the activation, their product (down_proj's input)
	if !a.Gated {
		mlp = 2 // the MLP's input and its activation
	}
	switch {
	case lora:
		// peft: the frozen linears save nothing of their input; each
		// adapter casts its input to fp32 (its own copy each: q, k and v
		// cast the same norm output three times) and keeps it, and its A
		// output of rank r. down_proj's input is the adapter's cast only.
		castH := int64(3 + 2)
		if c != computeHalf {
			castH = 2 // fp32 inputs need no cast: q, k, v share one, gate and up another
		}
		e = e.add(d, 4*castH, "h").add(d, 4, "q").add(d, 4, "f").add(d, 7*4, "r")
		e = e.add(d, (mlp-1)*el, "f")
	case c == computeAMP:
		// autocast casts the fp32 norm output once per linear: q, k, v, gate, up.
		e = e.add(d, (3+2)*2, "h").add(d, mlp*el, "f")
	default:
		e = e.add(d, mlp*el, "f")
	}
	return e
}

// gpt2Block is a GPT-2 block but its attention core: two LayerNorms (mean
// and rstd, 4 bytes a token each), the fused QKV projection's output (the
// attention saves views of it), the residual stream, dropout masks, and
// the MLP with GELU (gelu_new, in Python ops, keeps its input, tanh, 1 +
// tanh, half the input and the product).
func gpt2Block(a *Arch, s Setup, d dims, c computeKind) expr {
	var e expr
	e = e.add(d, 2*8, "")
	el := c.elem()
	switch c {
	case computeFP32:
		e = e.add(d, 2*4, "h") // the LayerNorm outputs
	case computeAMP:
		e = e.add(d, 2*2, "h") // their 16-bit casts (the fp32 outputs go)
	default:
		e = e.add(d, 2*2, "h")
	}
	e = e.add(d, el, "q").add(d, 2*el, "kv") // c_attn's output: q, k, v
	e = e.add(d, 2*c.residual(), "h")
	if a.Dropout && s.training() {
		e = e.add(d, 2, "h") // masks of the attention and MLP output dropouts
	}
	switch {
	case a.fusedGELU():
		e = e.add(d, 2*el, "f") // c_fc's output and the activation
	case c == computeAMP:
		// pow runs in fp32 under autocast, so from c_fc's 16-bit output x
		// the graph keeps x's fp32 cast (pow's input), tanh's output, 1 +
		// tanh, 0.5·x in 16 bits, and c_proj's 16-bit cast of the product.
		e = e.add(d, 4+4+4+2+2, "f")
	default:
		e = e.add(d, 5*el, "f")
	}
	return e
}

// attentionCore is what the attention kernel and the rotary embedding
// keep per token: for a fused kernel its inputs q, k, v as the kernel
// receives them (casts to 16-bit under autocast), its output and its
// log-sum-exp (4 bytes a head); for the math fallback and transformers'
// eager code the repeated keys and values (grouped-query heads expanded to
// every head), the scaled query and the output copy. GPT-2's q, k, v are
// views of its fused projection (counted there).
func attentionCore(a *Arch, s Setup, d dims, c computeKind, be backend) expr {
	var e expr
	el := c.elem()
	gpt2 := a.Family == FamilyGPT2
	switch be {
	case backendFused:
		if !gpt2 {
			e = e.add(d, el, "q").add(d, 2*el, "kv")
		}
		e = e.add(d, el, "q").add(d, 4, "a")
	case backendMath:
		e = e.add(d, 4*4, "q") // scaled q, repeated k and v, output
	case backendEager:
		if gpt2 {
			e = e.add(d, el, "q") // the output, made contiguous for c_proj
		} else {
			e = e.add(d, 4*el, "q") // q, repeated k and v, the output made contiguous
		}
	}
	return e
}

// eagerScores is the bytes per attention score transformers' eager code
// keeps: the softmax's output (fp32 in Llama's code and under autocast;
// GPT-2's runs in the scores' dtype), the copy in the value matmul's dtype
// when that differs, and with attention dropout the dropout's mask (1
// byte) and output in that dtype instead of the copy.
func eagerScores(a *Arch, s Setup, c computeKind) int64 {
	soft := int64(4)
	if a.Family == FamilyGPT2 && c == computeHalf {
		soft = 2
	}
	probs := c.elem()
	if a.Dropout && s.training() {
		return soft + 1 + probs
	}
	if probs != soft {
		return soft + probs
	}
	return soft
}

// outsideKept is what a step keeps outside its blocks per token: the
// embedding's output (the first block's residual input: fp32 in fp32 and
// under autocast; GPT-2's embedding dropout output and mask), and the
// final norm's (the head's input, or its 16-bit cast).
func outsideKept(a *Arch, s Setup) expr {
	d := dimsOf(a, s)
	c := s.compute()
	var e expr
	if a.Family == FamilyGPT2 {
		e = e.add(d, c.residual(), "h").add(d, 8, "")
		if a.Dropout && s.training() {
			e = e.add(d, 1, "h")
		}
		switch c {
		case computeFP32:
			e = e.add(d, 4, "h")
		default:
			e = e.add(d, 2, "h")
		}
		return e
	}
	if c != computeHalf {
		e = e.add(d, 4, "h")
	}
	lora := s.LoRARank > 0
	e = norm(e, d, c, "h", "", lora)
	if c == computeAMP && !lora {
		e = e.add(d, 2, "h") // the head's 16-bit input
	}
	return e
}

// lossBytesPerLogit is what transformers' causal-LM loss holds per logit
// at the start of backward: it computes on float32 logits, and keeps the
// log-softmax's output while the gradients of the NLL and the log-softmax
// are made (3 × 4 bytes), in every precision.
const lossBytesPerLogit = 12

// blockScratch is the largest a block's backward holds at once beyond
// what it keeps, per token: the gradients through the MLP (about three
// tensors of its width).
func blockScratch(a *Arch, s Setup) expr {
	d := dimsOf(a, s)
	return expr{}.add(d, 3*s.compute().elem(), "f")
}

// fusedGELU reports whether the MLP's activation is one kernel (GELU
// exact or tanh-approximated by PyTorch); GPT-2's default gelu_new is
// written in Python ops, each keeping a tensor of the MLP's width.
func (a *Arch) fusedGELU() bool {
	return a.Activation == "gelu" || a.Activation == "gelu_pytorch_tanh"
}
