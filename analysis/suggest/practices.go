package suggest

import (
	"path"
	"strings"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/analysis/whatif"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// practices are what the run already does, read from its frames and
// categories: a suggestion to do it again would save nothing.
type practices struct {
	// autocast: autocast's weight copies, or autocast's (or GradScaler's)
	// frames: the run computes in 16-bit already.
	autocast bool
	// checkpointing: activation checkpointing's frames
	// (torch/utils/checkpoint.py, DeepSpeed's and Megatron's).
	checkpointing bool
	// quantizedBy names the library whose quantized weights the run uses
	// (bitsandbytes, GPTQ, AWQ, torchao, FlexGen's compression), "" if none.
	quantizedBy string
	// pretrained: weights loaded from a checkpoint (from_pretrained,
	// load_state_dict, safetensors) or adapters (peft): fine-tuning.
	pretrained bool
	// transformers: most of the activations at the decisive moment were
	// made under a Hugging Face transformers model's modeling files; peft:
	// adapters in the frames. Their own switches are the way to checkpoint.
	transformers, peft bool
	// sharded: a sharding framework's frames (FSDP, DeepSpeed's ZeRO):
	// parameters, gradients and optimizer state are sharded already.
	sharded bool
	// accumulates: gradients accumulate over micro-batches (those zero_grad
	// frees live through a forward and the backward after it).
	accumulates bool
}

// practicesOf reads the practices from the snapshot's frames and the
// device's blocks.
func practicesOf(h *history.History) practices {
	var p practices
	flexgen, compressed := false, false
	for i := range h.Snap.Frames {
		f := &h.Snap.Frames[i]
		file := strings.ToLower(strings.ReplaceAll(f.Filename, "\\", "/"))
		name := f.Name
		peft := history.IsPeftFile(file)
		p.peft = p.peft || peft
		p.sharded = p.sharded || history.IsShardingFrame(f)
		switch {
		case strings.HasSuffix(file, "torch/amp/autocast_mode.py"), strings.HasSuffix(file, "amp/grad_scaler.py"),
			strings.Contains(name, "at::autocast::"), strings.HasSuffix(file, "torch/cuda/amp/autocast_mode.py"):
			p.autocast = true
		case strings.HasSuffix(file, "torch/utils/checkpoint.py"), strings.Contains(file, "activation_checkpointing/checkpointing.py"),
			strings.HasSuffix(file, "tensor_parallel/random.py") && strings.Contains(name, "checkpoint"):
			p.checkpointing = true
		case name == "from_pretrained" || name == "load_state_dict" || strings.Contains(file, "safetensors/") || peft:
			p.pretrained = true
		}
		if p.quantizedBy == "" {
			p.quantizedBy = quantizer(file)
		}
		if p.quantizedBy == "" {
			p.quantizedBy = quantizerOp(name)
		}
		flexgen = flexgen || strings.Contains(file, "flexgen") || path.Base(file) == "flex_opt.py"
		compressed = compressed || path.Base(file) == "compression.py"
	}
	if p.quantizedBy == "" && flexgen && compressed {
		p.quantizedBy = "FlexGen's compression"
	}
	for i := range h.Snap.Annotations {
		// FSDP's profiler spans, which a snapshot keeps without frames
		p.sharded = p.sharded || history.IsShardingFrame(&snapshot.Frame{Name: h.Snap.Annotations[i].Name})
	}
	for i := range h.Blocks {
		p.autocast = p.autocast || h.Blocks[i].Category == result.AutocastCache
	}
	p.accumulates = whatif.AccumulatesGradients(h)
	return p
}

// madeByTransformers reports whether most of the activations live after
// event i were made under a transformers model's modeling files: then
// checkpointing them is that model's switch.
func madeByTransformers(h *history.History, i int) bool {
	hf := map[snapshot.StackID]bool{}
	var in, all int64
	for _, b := range h.LiveBlocks(i) {
		if b.Category != result.Activation {
			continue
		}
		all += b.Size
		is, ok := hf[b.Stack]
		if !ok {
			for _, id := range h.Snap.StackOf(b.Stack) {
				file := strings.ReplaceAll(h.Snap.Frames[id].Filename, "\\", "/")
				if strings.Contains(file, "transformers/models/") {
					is = true
					break
				}
			}
			hf[b.Stack] = is
		}
		if is {
			in += b.Size
		}
	}
	return all > 0 && 2*in >= all
}

// quantizer names the weight-quantization library a Python file belongs
// to, or "".
func quantizer(file string) string {
	switch {
	case strings.Contains(file, "bitsandbytes/"):
		return "bitsandbytes"
	case strings.Contains(file, "auto_gptq/") || strings.Contains(file, "gptqmodel/") || strings.Contains(file, "/gptq"):
		return "GPTQ"
	case strings.Contains(file, "/awq/") || strings.Contains(file, "autoawq") || strings.HasPrefix(file, "awq/"):
		return "AWQ"
	case strings.Contains(file, "exllama") || strings.Contains(file, "marlin"):
		return "GPTQ (ExLlama/Marlin kernels)"
	case strings.Contains(file, "torchao/quantization"):
		return "torchao"
	}
	return ""
}

// quantizerOp names the weight-quantization library an operator, a C++
// symbol or a module's span belongs to, or "": a trace recorded without
// Python stacks still names the quantized kernels it ran (bitsandbytes'
// and torchao's registered operators, the int4/int8 weight-packed matmuls
// and int8 × int8 matmuls,
// GPTQ/AWQ/Marlin kernels) and the quantized layers (Linear4bit,
// Linear8bitLt). Only names that hold "::" (operators, symbols) or a
// module's span are read: a Python function's own name proves nothing.
func quantizerOp(name string) string {
	if module, ok := strings.CutPrefix(name, "nn.Module: "); ok {
		if strings.HasPrefix(module, "Linear4bit") || strings.HasPrefix(module, "Linear8bitLt") {
			return "bitsandbytes"
		}
		return ""
	}
	if !strings.Contains(name, "::") {
		return ""
	}
	low := strings.ToLower(name)
	switch {
	case strings.Contains(low, "bitsandbytes::"):
		return "bitsandbytes"
	case strings.Contains(low, "torchao::"):
		return "torchao"
	case strings.Contains(low, "_weight_int4pack_mm") || strings.Contains(low, "_weight_int8pack_mm") || strings.Contains(low, "_convert_weight_to_int4pack"):
		return "int4/int8 weight-only kernels"
	case strings.HasSuffix(low, "::_int_mm"):
		// int8 × int8 matmuls: weights stored in int8 (dynamic W8A8,
		// SmoothQuant). Float8's _scaled_mm is not one: float8 training
		// casts 16-bit weights anew each step.
		return "int8 matmuls (aten::_int_mm)"
	case strings.Contains(low, "marlin"):
		return "GPTQ (ExLlama/Marlin kernels)"
	case strings.Contains(low, "gptq") || strings.Contains(low, "exllama"):
		return "GPTQ"
	case strings.Contains(low, "awq"):
		return "AWQ"
	case strings.HasPrefix(low, "quantized::"):
		return "PyTorch's quantized operators"
	}
	return ""
}
