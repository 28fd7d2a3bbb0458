package suggest

import (
	"fmt"
	"sort"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// From chooses the suggestions of the design table from the evidence of
// the device that matters most and from the leak findings, ranked by
// estimated savings — except that what only releases cached memory after
// the fact (empty_cache) comes after every fix that lowers the peak.
func From(ev *Evidence, leaks []result.Leak) []result.Suggestion {
	out := append(fromEvidence(ev), leakSuggestions(leaks)...)
	rankSuggestions(out, ev != nil && ev.StatesFirst)
	if out == nil {
		return []result.Suggestion{}
	}
	return out
}

// rankSuggestions orders suggestions by estimated saving, except that what
// only releases cached memory after the fact (empty_cache) comes after
// every fix that lowers the peak, and — statesFirst — where parameters,
// gradients and optimizer state alone leave no room, what shrinks them
// comes before any activation fix.
func rankSuggestions(out []result.Suggestion, statesFirst bool) {
	sort.SliceStable(out, func(a, b int) bool {
		if la, lb := LowersPeak(out[a].ID), LowersPeak(out[b].ID); la != lb {
			return la
		}
		if sa, sb := statesFirst && ShrinksStates(out[a].ID), statesFirst && ShrinksStates(out[b].ID); sa != sb {
			return sa
		}
		return out[a].EstimatedSavingsBytes > out[b].EstimatedSavingsBytes
	})
}

// LowersPeak reports whether a suggestion lowers the memory a run needs at
// its peak (every one but empty_cache, which hands back what the allocator
// cached once the peak is over).
func LowersPeak(id string) bool { return id != "empty_cache" }

// fromEvidence chooses the suggestions one device's evidence supports,
// dropping those that would save under 1 MiB or 1% of the memory in question.
func fromEvidence(ev *Evidence) []result.Suggestion {
	if ev == nil || ev.total <= 0 && ev.oom == nil {
		return nil
	}
	var out []result.Suggestion
	c := ev.cats
	act, par, grad, opt := c[result.Activation]+c[result.Temporary]+c[result.AutogradDetail], c[result.Parameter], c[result.Gradient], c[result.OptimizerState]
	where := fmt.Sprintf("on %s %s", ev.name, ev.moment)
	oomPhase := ev.oom != nil && (ev.phase == result.PhaseForward || ev.phase == result.PhaseBackward)
	inOpt := ev.oom != nil && ev.phase == result.PhaseOptimizer

	// Checkpointing trades recomputation in backward for memory: only a run
	// with a backward keeps activations to recompute, and one that already
	// checkpoints has done it; at an OOM, activations under 10% of the
	// memory are not where the memory went. It recomputes what forward
	// keeps for backward (activation): temporaries and the autograd
	// engine's buffers stay as they are.
	if ev.Backward && !ev.done.checkpointing && (oomPhase && units.Percent(act, ev.total) >= 10 || units.Percent(act, ev.total) >= 40) {
		because := fmt.Sprintf("activations and temporaries are %s of %s allocated %s (%.0f%%)", units.FormatBytes(act), units.FormatBytes(ev.total), where, units.Percent(act, ev.total))
		if oomPhase {
			because = fmt.Sprintf("the OOM happened in %s with %s of activations and temporaries live (%.0f%% of %s allocated) %s", ev.phase, units.FormatBytes(act), units.Percent(act, ev.total), units.FormatBytes(ev.total), where)
		}
		how := "from torch.utils.checkpoint import checkpoint\n# in the model's forward, around each transformer block / large submodule:\nx = checkpoint(block, x, use_reentrant=False)"
		switch {
		case ev.done.transformers && ev.done.peft:
			how = "model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={\"use_reentrant\": False})  # transformers: each decoder layer\nmodel.enable_input_require_grads()  # peft: the frozen embeddings' output must require grad\nmodel.config.use_cache = False"
		case ev.done.transformers:
			how = "model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={\"use_reentrant\": False})  # transformers: each decoder layer\nmodel.config.use_cache = False"
		}
		out = append(out, result.Suggestion{ID: "activation_checkpointing", Title: "Recompute activations in backward (activation checkpointing)",
			Because: because, EstimatedSavingsBytes: c[result.Activation] * 65 / 100, Cost: "about 30% slower steps (forward runs twice)",
			How: how})
	}
	if ev.attention > 0 && (units.Percent(ev.attention, ev.total) >= 10 || ev.oomAttn || ev.oomSDPA) {
		because := fmt.Sprintf("attention tensors (scores/softmax, size ∝ sequence²) hold %s %s, largest at %s", units.FormatBytes(ev.attention), where, ev.attnSite)
		if ev.oomSDPA {
			because = fmt.Sprintf("the failing %s allocation is scaled_dot_product_attention's math backend, which materialises the sequence² score matrix; attention tensors hold %s %s", units.FormatBytes(ev.oom.RequestedBytes), units.FormatBytes(ev.attention), where)
		} else if ev.oomAttn {
			because = fmt.Sprintf("the failing %s allocation is in attention code; attention tensors hold %s %s", units.FormatBytes(ev.oom.RequestedBytes), units.FormatBytes(ev.attention), where)
		}
		out = append(out, result.Suggestion{ID: "flash_attention", Title: "Use a fused attention kernel (FlashAttention / memory-efficient SDPA)",
			Because: because, EstimatedSavingsBytes: ev.attention * 4 / 5, Cost: "none; usually faster",
			How: "out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # bf16/fp16 inputs, no explicit attn_mask\n# force and verify the fused kernel:\nfrom torch.nn.attention import sdpa_kernel, SDPBackend\nwith sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):\n    out = model(batch)"})
		if units.Percent(ev.attention, ev.total) >= 30 {
			out = append(out, result.Suggestion{ID: "reduce_sequence_length", Title: "Shorten the sequence length",
				Because:               fmt.Sprintf("attention tensors are %.0f%% of %s allocated %s and grow with the square of the sequence", units.Percent(ev.attention, ev.total), units.FormatBytes(ev.total), where),
				EstimatedSavingsBytes: ev.attention * 3 / 4, Cost: "less context per sample",
				How: "halve max_seq_len / block_size (attention memory falls about 4×), or pack shorter sequences"})
		}
	}
	actDominate := units.Percent(act, ev.total) >= 50 || oomPhase && units.Percent(act, ev.total) >= 30
	if !ev.Backward && actDominate {
		because := fmt.Sprintf("activations and temporaries dominate %s: %s of %s (%.0f%%), and they scale with the batch", where, units.FormatBytes(act), units.FormatBytes(ev.total), units.Percent(act, ev.total))
		if ev.Training {
			because += "; no backward keeps them (nothing to recompute or accumulate)"
		} else {
			because += "; nothing here is trained"
		}
		out = append(out, result.Suggestion{ID: "reduce_batch_size", Title: "Process smaller batches (or chunk the input)",
			Because: because, EstimatedSavingsBytes: act / 2, Cost: "more, smaller forward passes",
			How: "for chunk in torch.split(batch, batch.shape[0] // 2):\n    with torch.inference_mode():\n        outputs.append(model(chunk))"})
	} else if ev.Backward && actDominate && ev.done.accumulates {
		// The run accumulates already: the same, with twice the steps.
		out = append(out, result.Suggestion{ID: "gradient_accumulation", Title: "Halve the micro-batch and accumulate twice as many",
			Because:               fmt.Sprintf("activations and temporaries dominate %s: %s of %s (%.0f%%), and they scale with the micro-batch; the run accumulates gradients over micro-batches already (its gradients live through the next forward and backward until zero_grad)", where, units.FormatBytes(act), units.FormatBytes(ev.total), units.Percent(act, ev.total)),
			EstimatedSavingsBytes: act / 2, Cost: "none for the result (same effective batch); twice the micro-steps",
			How: "accum *= 2; micro_batch //= 2  # the optimizer steps every accum micro-batches, as now"})
	} else if ev.Backward && actDominate {
		out = append(out, result.Suggestion{ID: "gradient_accumulation", Title: "Halve the micro-batch and accumulate gradients",
			Because:               fmt.Sprintf("activations and temporaries dominate %s: %s of %s (%.0f%%), and they scale with the micro-batch", where, units.FormatBytes(act), units.FormatBytes(ev.total), units.Percent(act, ev.total)),
			EstimatedSavingsBytes: act / 2, Cost: "none for the result (same effective batch); more, smaller steps",
			How: "accum = 2  # micro_batch = batch_size // accum\nfor i, (x, y) in enumerate(loader):\n    loss = loss_fn(model(x), y) / accum\n    loss.backward()\n    if (i + 1) % accum == 0:\n        optimizer.step()\n        optimizer.zero_grad(set_to_none=True)\n# or simply reduce batch_size (reduce_batch_size; may change convergence)"})
	}
	if opt > 0 && (units.Percent(opt, ev.total) >= 20 || inOpt) {
		because := fmt.Sprintf("optimizer state is %s of %s allocated %s (%.0f%%)", units.FormatBytes(opt), units.FormatBytes(ev.total), where, units.Percent(opt, ev.total))
		if inOpt {
			because = fmt.Sprintf("the OOM happened in the optimizer step with %s of optimizer state live %s", units.FormatBytes(opt), where)
		}
		out = append(out, result.Suggestion{ID: "optimizer_8bit", Title: "Use an 8-bit optimizer", Because: because,
			EstimatedSavingsBytes: opt * 3 / 4, Cost: "minimal (slightly different numerics)",
			How: "import bitsandbytes as bnb\noptimizer = bnb.optim.AdamW8bit(model.parameters(), lr=lr, weight_decay=wd)"})
		if inOpt {
			out = append(out, result.Suggestion{ID: "paged_optimizer", Title: "Use a paged optimizer", Because: because + "; paged state spills to CPU memory instead of failing",
				EstimatedSavingsBytes: opt * 3 / 4, Cost: "minimal unless the GPU is oversubscribed",
				How: "import bitsandbytes as bnb\noptimizer = bnb.optim.PagedAdamW8bit(model.parameters(), lr=lr)"})
		}
	}
	if inOpt && ev.oom != nil && opt > ev.oom.DeviceFreeBytes+ev.oom.RequestedBytes ||
		ev.capacity > 0 && par+grad+opt >= ev.capacity*9/10 {
		out = append(out, result.Suggestion{ID: "cpu_offload", Title: "Offload optimizer state (and parameters) to CPU",
			Because:               fmt.Sprintf("parameters, gradients and optimizer state need %s %s and do not fit next to the rest", units.FormatBytes(par+grad+opt), where),
			EstimatedSavingsBytes: opt, Cost: "2–5× slower steps",
			How: "# FSDP2: fully_shard(model, offload_policy=CPUOffloadPolicy())\n# DeepSpeed: \"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"cpu\"}}"})
	}
	if ev.done.quantizedBy != "" {
		// The weights are quantized already: no quantization to suggest.
	} else if units.Percent(par, ev.total) >= 50 && !ev.Training {
		because := fmt.Sprintf("parameters dominate %s: %s of %s (%.0f%%), and nothing is trained (no backward, no optimizer state, no training loop in the stacks)", where, units.FormatBytes(par), units.FormatBytes(ev.total), units.Percent(par, ev.total))
		if ev.noFrames && !ev.fp32 {
			// Quantized weights show in the frames or the ops that use
			// them; a file without either cannot tell.
			because += "; the file records no frames and no dtypes, so whether the weights are quantized already is not known: if they are, this does not apply"
		}
		out = append(out, result.Suggestion{ID: "quantize_weights", Title: "Load the weights in 8-bit (or 4-bit) for inference",
			Because:               because,
			EstimatedSavingsBytes: par / 2, Cost: "slightly slower matmuls; a small accuracy cost (check on your evaluation)",
			How: "from transformers import BitsAndBytesConfig\nmodel = AutoModelForCausalLM.from_pretrained(name, quantization_config=BitsAndBytesConfig(load_in_8bit=True))  # or load_in_4bit=True: ~75% saved\n# torchao: quantize_(model, int8_weight_only())"})
	} else if units.Percent(par, ev.total) >= 50 && ev.done.pretrained {
		// QLoRA fine-tunes a pretrained model: only where the run loads one.
		out = append(out, result.Suggestion{ID: "qlora", Title: "Fine-tune with QLoRA (4-bit frozen weights + LoRA adapters)",
			Because:               fmt.Sprintf("parameters dominate %s: %s of %s (%.0f%%), and the run fine-tunes weights it loaded (from_pretrained, a state dict or adapters): QLoRA is for fine-tuning a pretrained model", where, units.FormatBytes(par), units.FormatBytes(ev.total), units.Percent(par, ev.total)),
			EstimatedSavingsBytes: par * 3 / 4, Cost: "similar speed; only adapters are trained (fine-tuning only)",
			How: "from transformers import BitsAndBytesConfig\nfrom peft import LoraConfig, get_peft_model\nmodel = AutoModelForCausalLM.from_pretrained(name, quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16))\nmodel = get_peft_model(model, LoraConfig(r=16, target_modules=\"all-linear\"))"})
	}
	// Autocast computes the step in 16-bit; the weights, their gradients
	// and the optimizer's state stay fp32: it halves the activations.
	amp := fmt.Sprintf("the trace records fp32 parameters and no autocast; activations and temporaries are %s %s, and autocast computes them in 16-bit (weights, gradients and optimizer state stay fp32)", units.FormatBytes(act), where)
	if ev.fp32 && !ev.done.autocast && act > 0 && withoutBF16(ev.gpu, ev.gpuMajor) {
		// A GPU before Ampere has no bf16: its mixed precision is fp16
		// autocast, whose narrow range needs a gradient scaler.
		out = append(out, result.Suggestion{ID: "mixed_precision_fp16", Title: "Train in fp16 mixed precision (autocast + GradScaler)",
			Because:               fmt.Sprintf("%s; %s has no bf16, so fp16 with a gradient scaler", amp, gpuWords(ev.gpu, ev.gpuMajor)),
			EstimatedSavingsBytes: act / 2, Cost: "minimal (the scaler skips the steps whose gradients overflow)",
			How: "scaler = torch.amp.GradScaler(\"cuda\")\nwith torch.autocast(device_type=\"cuda\", dtype=torch.float16):\n    loss = loss_fn(model(x), y)\nscaler.scale(loss).backward()\nscaler.step(optimizer)\nscaler.update()"})
	} else if ev.fp32 && !ev.done.autocast && act > 0 {
		out = append(out, result.Suggestion{ID: "mixed_precision_bf16", Title: "Train in bf16 mixed precision",
			Because:               amp,
			EstimatedSavingsBytes: act / 2, Cost: "minimal on GPUs with bf16",
			How: "with torch.autocast(device_type=\"cuda\", dtype=torch.bfloat16):\n    loss = loss_fn(model(x), y)\nloss.backward()"})
	}
	// Expandable segments reclaim fragmentation: free space inside segments
	// that hold live blocks. Wholly free cached segments are not theirs to
	// save (the allocator frees them itself before it reports an OOM).
	if ev.oom != nil && ev.oom.Fragmentation.Fragmented && !ev.expandable {
		fr := ev.oom.Fragmentation
		out = append(out, result.Suggestion{ID: "expandable_segments", Title: "Enable expandable segments",
			Because:               fmt.Sprintf("at the OOM the allocator had %s cached free, more than the %s requested, but its largest free block was %s: fragmentation (%s free inside segments in use)", units.FormatBytes(fr.CachedFreeBytes), units.FormatBytes(ev.oom.RequestedBytes), units.FormatBytes(fr.LargestFreeBlockBytes), units.FormatBytes(fr.FreeInUsedSegmentsBytes)),
			EstimatedSavingsBytes: fr.FreeInUsedSegmentsBytes, Cost: "none",
			How: "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py"})
	} else if ev.oom == nil && !ev.expandable && ev.hasState && ev.PeakFragmented >= 1<<30 && units.Percent(ev.PeakFragmented, ev.peakRes) >= 25 &&
		(ev.capacity == 0 || ev.peakRes >= ev.capacity/10*8) {
		// Cached slack only matters under memory pressure: without it the
		// cache is simply reused by the next step.
		out = append(out, result.Suggestion{ID: "expandable_segments", Title: "Enable expandable segments",
			Because:               fmt.Sprintf("at the peak on device %d the allocator reserved %s for %s allocated, and %s of it is free space inside segments that hold live blocks: fragmentation", ev.device, units.FormatBytes(ev.peakRes), units.FormatBytes(ev.PeakAlloc), units.FormatBytes(ev.PeakFragmented)),
			EstimatedSavingsBytes: ev.PeakFragmented, Cost: "none",
			How: "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py"})
	}
	// Between runs, not inside a training loop whose next step reuses the
	// cache; empty_cache releases the cached segments without a live block.
	if ev.oom == nil && ev.steps <= 1 && ev.hasState && ev.endWhollyFree >= 1<<30 && units.Percent(ev.endWhollyFree, ev.endRes) >= 50 {
		out = append(out, result.Suggestion{ID: "empty_cache", Title: "Release cached memory between phases",
			Because:               fmt.Sprintf("at the end device %d reserved %s for %s allocated, and %s of it is cached segments without a live block", ev.device, units.FormatBytes(ev.endRes), units.FormatBytes(ev.endAlloc), units.FormatBytes(ev.endWhollyFree)),
			EstimatedSavingsBytes: ev.endWhollyFree, Cost: "none (the next allocations pay cudaMalloc again); the peak stays as it is",
			How: "torch.cuda.empty_cache()  # e.g. after evaluation, before the next phase or another process needs the memory"})
	}
	if ev.gradsInFwd > 0 {
		because := fmt.Sprintf("%s of gradients stay allocated during forward on %s: they are kept across steps", units.FormatBytes(ev.gradsInFwd), ev.name)
		if ev.lateZero >= 0 {
			because = fmt.Sprintf("%s of the previous step's gradients are still allocated at the forward peak on %s: zero_grad frees them only after the forward (event %d)", units.FormatBytes(ev.gradsInFwd), ev.name, ev.lateZero)
		}
		out = append(out, result.Suggestion{ID: "set_to_none", Title: "Free gradients before the next forward",
			Because:               because,
			EstimatedSavingsBytes: ev.gradsInFwd, Cost: "none",
			How: "optimizer.zero_grad(set_to_none=True)  # the default since PyTorch 2.0; call it right after optimizer.step()"})
	}
	out = append(out, stateSuggestions(ev, where)...)
	// Drop what would not matter: under 1 MiB or 1% of the memory in question.
	kept := out[:0]
	for _, sg := range out {
		if sg.EstimatedSavingsBytes >= savingFloor(sg.ID, ev.total) {
			kept = append(kept, sg)
		}
	}
	return kept
}

// savingFloor is the least a suggestion must save to be made: 1 MiB, and
// 1% of the memory in question — except for memory nothing uses (a KV
// cache that training never reads, gradients moved with the model), which
// costs nothing to drop.
func savingFloor(id string, total int64) int64 {
	if id == "use_cache_off" || id == "drop_grads_before_move" {
		return 1 << 20
	}
	return max(int64(1<<20), total/100)
}

// leakSuggestions turns medium- and high-confidence leak findings into the
// detach_or_item / no_grad_eval suggestions; the saving is what the
// findings of each hold at the end, all of them (two lists kept per step
// save both).
func leakSuggestions(leaks []result.Leak) []result.Suggestion {
	var out []result.Suggestion
	index := map[string]int{}
	more := map[string]int{}
	for _, l := range leaks {
		if l.Confidence == result.Low || l.Kind == result.LeakStepGrowth || l.Kind == result.LeakReferenceCycle {
			continue
		}
		id, title, how := "detach_or_item", "Stop keeping tensors (and their graphs) across steps",
			"total_loss += loss.item()        # a Python float, not a tensor with a graph\noutputs.append(logits.detach().cpu())"
		if l.Kind == result.LeakRetainedGraph {
			id, title, how = "no_grad_eval", "Run evaluation without autograd",
				"with torch.inference_mode():    # or torch.no_grad()\n    for x, y in val_loader:\n        total_loss += loss_fn(model(x), y).item()"
		}
		if i, ok := index[id]; ok {
			out[i].EstimatedSavingsBytes += l.TotalBytes
			more[id]++
			continue
		}
		index[id] = len(out)
		out = append(out, result.Suggestion{ID: id, Title: title,
			Because:               fmt.Sprintf("%s leak at %s: %s per step over %d steps (%s)", l.Kind, l.Site, units.FormatBytes(l.BytesPerStep), l.Steps, l.Evidence),
			EstimatedSavingsBytes: l.TotalBytes, Cost: "none", How: how})
	}
	for id, n := range more {
		s := &out[index[id]]
		s.Because += fmt.Sprintf("; and %d more such %s, %s held in all", n, map[bool]string{true: "leak", false: "leaks"}[n == 1], units.FormatBytes(s.EstimatedSavingsBytes))
	}
	return out
}
