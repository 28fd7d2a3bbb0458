package estimate

import "fmt"

// Help states the formulas for --help.
const Help = `Formulas (bytes per GPU; GB in the guide's sense is 10^9 bytes, output uses GiB):
  parameters    N × 4 (fp32), 2 (bf16/fp16), 1 (int8), 0.5 (int4); int8/int4 quantize the
                blocks' linear layers (bitsandbytes), embeddings, head and norms stay 16-bit
  gradients     trainable × 4 (fp32) or 2 (16-bit); --mixed adds fp32 master weights (× 4)
  optimizer     AdamW: 2 states × 4 (fp32, mixed) or 2 (pure 16-bit); 8-bit AdamW: 2 × 1;
                SGD-momentum: 1 state; Adafactor: rows + columns of each matrix (β1 off)
  activations   per layer, Korthikanti et al. 2022 (16-bit, dropout, GPT MLP of 4h):
                s·b·h·(34 + 5·a·s/h); generalised to KV heads, SwiGLU, fp32, no dropout.
                Flash attention and selective recomputation drop the s² term (5·a·s²·b);
                full recomputation keeps 2·s·b·h per layer plus one layer recomputed.
                Output layer: 4·s·b·h·(1 + v/h) (fp32 logits for the loss).
  floor         the guide's rule: b·s·h·L·bytes (a hidden state per layer) plus one
                layer's attention scores b·a·s²·bytes (e.g. 32 heads × 2048² × 2 = 256 MiB)
  LoRA          r·(in + out) fp32 adapter weights per linear layer; base frozen
  ZeRO          stage 1 divides optimizer state (and master weights) by N GPUs,
                2 also gradients, 3 also parameters (one block gathered at a time)
  fits          total ≤ 95% of the GPU (CUDA context, workspaces, allocator slack)`

// Formulas states the formulas the estimate of s used, for the output.
func Formulas(s Setup) []string {
	out := []string{
		fmt.Sprintf("parameters: count × %s bytes (%s)", bytesWord(s.weightBits()), s.Precision),
	}
	if s.training() {
		out = append(out, "gradients: trainable × "+map[bool]string{true: "2", false: "4"}[s.sixteenBit() && s.LoRARank == 0]+" bytes")
		switch s.Optimizer {
		case "adamw", "adamw8bit", "paged-adamw8bit":
			out = append(out, fmt.Sprintf("optimizer: AdamW 2 states × %s per trainable parameter", plural(s.stateBytes(), "byte")))
		case "sgd-momentum":
			out = append(out, fmt.Sprintf("optimizer: 1 momentum state × %s", plural(s.stateBytes(), "byte")))
		case "adafactor":
			out = append(out, "optimizer: Adafactor, rows + columns per matrix")
		}
		if s.Mixed {
			out = append(out, "master weights: trainable × 4 bytes (fp32)")
		}
	}
	act := "activations/layer: s·b·h·(34 + 5·a·s/h) B (Korthikanti 2022), generalised to this model"
	switch {
	case !s.training():
		act = "activations: one layer's working set and the logits (inference keeps nothing)"
	case s.Checkpointing == "full":
		act = "activations: full recomputation, 2·s·b·h per layer (16-bit) + one layer recomputed"
	case s.Checkpointing == "selective" || s.Flash:
		act = "activations/layer: s·b·h·34 B (Korthikanti 2022, no s² term), generalised to this model"
	}
	floor := "floor (guide): b·s·h·L·bytes + one layer's scores b·a·s²·bytes"
	if !s.training() {
		floor = "floor (guide): one hidden state b·s·h·bytes + one layer's scores b·a·s²·bytes"
	}
	out = append(out, act, floor)
	if s.ZeRO > 0 {
		out = append(out, fmt.Sprintf("ZeRO-%d: sharded over %d GPUs", s.ZeRO, s.World))
	}
	return out
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

func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
