package estimate

import (
	"fmt"

	"github.com/torchmem/torchmem/internal/units"
)

// Help states the formulas for --help.
const Help = `Formulas (bytes per GPU; GB in the guide's sense is 10^9 bytes, output uses GiB):
  parameters    N × 4 (fp32, and under --amp), 2 (bf16/fp16), 1 (int8), 0.5 (int4); int8/int4
                quantize the blocks' linear layers (bitsandbytes), the rest stays 16-bit
  gradients     trainable × 4 (fp32, --amp) or 2 (16-bit); --mixed adds fp32 master weights (× 4)
  optimizer     AdamW: 2 states × 4 (fp32, --amp, --mixed) or 2 (pure 16-bit); 8-bit AdamW: 2 × 1;
                SGD-momentum: 1 state; Adafactor: rows + columns of each matrix (β1 off)
  peak          the largest phase of a step:
                backward  weights + state + what every block keeps + 12·b·s·v (the causal-LM
                          loss on fp32 logits) + autocast's weight copies + cuBLAS workspaces
                optimizer weights + gradients + state + the step's scratch (PyTorch's foreach
                          AdamW: one more copy of the trainable weights)
                inference weights + the largest working set (a block, or b·s·v logits) + KV cache
  per block     counted tensor by tensor from transformers' code and PyTorch's autograd, by
                precision and attention kernel (printed below for the model asked about); the
                textbook figure (Korthikanti et al. 2022: s·b·h·(34 + 5·a·s/h) in 16-bit) is
                shown beside it
  checkpointing transformers' gradient checkpointing keeps each block's input; one block is
                recomputed at a time in backward
  KV cache      2 × layers × batch × KV heads × head_dim × (prompt + new tokens) × bytes
  LoRA          r·(in + out) fp32 adapter weights per linear layer; base frozen; each adapter keeps
                its input cast to fp32
  ZeRO          stage 1 divides optimizer state (and master weights) by N GPUs,
                2 also gradients, 3 also parameters (one block gathered at a time)
  fits          peak ≤ capacity − 0.5 GiB (CUDA context) − 5% of the rest (allocator slack)`

// Formulas states the formulas the estimate of in used, with the numbers
// it put in them.
func Formulas(in Inputs) []string {
	s := in.Setup
	out := []string{
		fmt.Sprintf("parameters: count × %s bytes (%s)", bytesWord(s.weightBits()), s.Precision),
	}
	if s.training() {
		out = append(out, "gradients: trainable × "+map[bool]string{true: "2", false: "4"}[s.sixteenBit() && s.LoRARank == 0]+" bytes")
		switch s.Optimizer {
		case "adamw", "adamw-fused", "adamw-loop", "adamw8bit", "paged-adamw8bit":
			out = append(out, fmt.Sprintf("optimizer: AdamW 2 states × %s per trainable parameter", units.Plural(s.stateBytes(), "byte")))
		case "sgd-momentum":
			out = append(out, fmt.Sprintf("optimizer: 1 momentum state × %s", units.Plural(s.stateBytes(), "byte")))
		case "adafactor":
			out = append(out, "optimizer: Adafactor, rows + columns per matrix")
		}
		if s.Mixed {
			out = append(out, "master weights: trainable × 4 bytes (fp32)")
		}
		switch {
		case optimizerScratch(in, 1) == 0:
		case s.Optimizer == "adamw":
			out = append(out, fmt.Sprintf("optimizer step scratch: trainable × %s (foreach AdamW)", units.Plural(s.stateBytes(), "byte")))
		default:
			out = append(out, fmt.Sprintf("optimizer step scratch: 2 × the largest tensor × %s (AdamW, one parameter at a time)", units.Plural(s.stateBytes(), "byte")))
		}
	}
	a := in.Arch
	if a == nil {
		return append(out, "activations: unknown without the architecture")
	}
	d := dimsOf(a, s)
	names := fmt.Sprintf("h=%d q=%d kv=%d f=%d a=%d v=%d", d["h"], d["q"], d["kv"], d["f"], d["a"], d["v"])
	if s.LoRARank > 0 {
		names += fmt.Sprintf(" r=%d", s.LoRARank)
	}
	if !s.training() {
		out = append(out, "inference: residual stream + the larger of a block's working set and b·s·v logits",
			"dimensions: "+names)
		if s.NewTokens > 0 {
			out = append(out, fmt.Sprintf("KV cache: 2 × %d layers × b × kv × (%d + %d − 1 tokens: the last is never read back) × %d bytes", a.Layers, s.Seq, s.NewTokens, s.compute().elem()))
		}
		return out
	}
	perToken, perScore := blockKept(a, s)
	block := fmt.Sprintf("per block (%s, %s, %s): b·s·(%s) B", a.Family, computeName(s), attentionName(a, s), perToken)
	if perScore > 0 {
		block += fmt.Sprintf(" + %d·b·a·s² B (scores)", perScore)
	}
	out = append(out, block, fmt.Sprintf("outside the blocks: b·s·(%s) B", outsideKept(a, s)),
		fmt.Sprintf("loss: %d·b·s·v B (fp32 log-softmax and two gradients)", lossBytesPerLogit), "dimensions: "+names)
	if s.Checkpointing == "full" {
		out = append(out, fmt.Sprintf("checkpointing: %d·b·s·h B per block (its input) + one block recomputed", s.compute().residual()))
	}
	if s.AMP && s.LoRARank == 0 {
		out = append(out, "autocast: a 2-byte copy of every linear weight and of the head")
	}
	out = append(out, "textbook (Korthikanti 2022): s·b·h·(34 + 5·a·s/h) per layer, generalised to this model",
		"floor (guide): b·s·h·L·bytes + one layer's scores b·a·s²·bytes")
	if s.ZeRO > 0 {
		out = append(out, fmt.Sprintf("ZeRO-%d: sharded over %d GPUs", s.ZeRO, s.World))
	}
	return out
}

// computeName names the precision of a step's compute.
func computeName(s Setup) string {
	switch s.compute() {
	case computeAMP:
		return "fp32 weights, bf16 autocast"
	case computeFP32:
		return "fp32"
	}
	return "16-bit"
}

// attentionName names the attention kernel a step runs.
func attentionName(a *Arch, s Setup) string {
	switch backendOf(a, s) {
	case backendMath:
		return "SDPA math fallback (fp32 grouped-query)"
	case backendEager:
		return "eager attention"
	}
	if s.Attention == "flash" {
		return "FlashAttention"
	}
	return "SDPA fused kernel"
}

func bytesWord(bits int64) string {
	if bits%8 == 0 {
		return fmt.Sprint(bits / 8)
	}
	return fmt.Sprintf("%g", float64(bits)/8)
}

// notes says what the estimate leaves out or assumed.
func notes(in Inputs, r *Result) []string {
	out := []string{}
	s, a := in.Setup, in.Arch
	if a == nil {
		out = append(out, "activations unknown without the architecture (give --config, or --hidden, --layers, --heads)",
			"LoRA and QLoRA plans need the architecture too")
		if in.GPU != nil && r.Fits == nil {
			out = append(out, "fits: unknown until the activations are counted (the rest alone fits)")
		}
	} else if in.Params > 0 && a.Vocab == 0 {
		out = append(out, "vocabulary unknown: the logits are not counted")
	}
	if a != nil && a.Vocab > 0 {
		out = append(out, "the blocks are counted as transformers' own "+a.Family+" code runs them (calibrated on measured runs); "+
			"a model written by hand can keep much more (a hand-written softmax keeps two seq² tensors a layer): "+
			"`torchmem estimate --from` a short run of it projects what it really keeps")
	}
	if a != nil && a.Positions > 0 && s.Seq > a.Positions {
		out = append(out, fmt.Sprintf("sequence %d is longer than the model's %d learned positions", s.Seq, a.Positions))
	}
	if s.quantized() {
		out = append(out, "int8/int4: quantization constants (~0.5 bit a weight, NF4 with double quantization) not counted")
	}
	if s.Optimizer == "adamw8bit" || s.Optimizer == "paged-adamw8bit" {
		out = append(out, "8-bit AdamW: per-block scales (0.2%) and fp32 states of tensors under 4096 elements are not counted")
	}
	if s.Optimizer == "paged-adamw8bit" {
		out = append(out, "paged: the state spills to CPU memory under pressure instead of failing")
	}
	if s.ZeRO > 0 && s.World == 1 {
		out = append(out, "ZeRO over 1 GPU shards nothing: give --world N")
	}
	if s.Optimizer == "adafactor" && (a == nil || in.Params > 0) {
		out = append(out, "Adafactor without the shapes: counted as 4 bytes per parameter")
	}
	return out
}
