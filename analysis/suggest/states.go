package suggest

import (
	"fmt"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// ShrinksStates reports whether a suggestion shrinks what a training run
// keeps whatever its batch: parameters, gradients, optimizer state.
func ShrinksStates(id string) bool {
	switch id {
	case "mixed_precision_bf16", "mixed_precision_fp16", "shard_states", "optimizer_8bit", "paged_optimizer", "cpu_offload", "qlora", "quantize_weights", "ddp_bucket_view":
		return true
	}
	return false
}

// stateSuggestions are the suggestions about memory the run keeps for
// other reasons than its activations: sharding when the states alone leave
// no room at an OOM, gradients moved with the model, gradients kept beside
// DistributedDataParallel's buckets, and a KV cache that training builds
// and never reads.
func stateSuggestions(ev *Evidence, where string) []result.Suggestion {
	var out []result.Suggestion
	c := ev.cats
	states := c[result.Parameter] + c[result.Gradient] + c[result.OptimizerState]
	if ev.StatesFirst && ev.Training && ev.done.sharded {
		// Sharded already: more ranks make each shard smaller; what a
		// module gathers for its forward and backward stays its size.
		out = append(out, result.Suggestion{ID: "shard_states", Title: "Shard over twice as many GPUs",
			Because: fmt.Sprintf("at the OOM parameters, gradients and optimizer state hold %s %s and leave less room than the %s requested; the run shards them already (FSDP / ZeRO): over twice the ranks each keeps half its shards (the parameters a module gathers stay their size)",
				units.FormatBytes(states), where, units.FormatBytes(ev.oom.RequestedBytes)),
			EstimatedSavingsBytes: states / 2, Cost: "twice the GPUs; more communication each step",
			How: "torchrun --nproc-per-node 2N train.py  # or a larger shard group: fully_shard(model, mesh=init_device_mesh(\"cuda\", (2 * N,)))"})
	} else if ev.StatesFirst && ev.Training {
		out = append(out, result.Suggestion{ID: "shard_states", Title: "Shard parameters, gradients and optimizer state across GPUs (FSDP / ZeRO-3)",
			Because: fmt.Sprintf("at the OOM parameters, gradients and optimizer state hold %s %s and leave less room than the %s requested: no activation fix makes the step fit; sharded over 2 GPUs each keeps half of them",
				units.FormatBytes(states), where, units.FormatBytes(ev.oom.RequestedBytes)),
			EstimatedSavingsBytes: states / 2, Cost: "communication each step; needs more GPUs (the saving grows with their number)",
			How: "from torch.distributed.fsdp import fully_shard  # FSDP2, PyTorch ≥ 2.4\nfor block in model.layers:\n    fully_shard(block)\nfully_shard(model)\n# DeepSpeed: \"zero_optimization\": {\"stage\": 3}"})
	}
	if ev.movedGrads > 0 {
		out = append(out, result.Suggestion{ID: "drop_grads_before_move", Title: "Drop the gradients before moving the model",
			Because:               fmt.Sprintf("Module.to() moved %s of gradients with the model %s: each parameter's .grad is copied beside it", units.FormatBytes(ev.movedGrads), where),
			EstimatedSavingsBytes: ev.movedGrads, Cost: "none (the next backward makes them again)",
			How: "model.zero_grad(set_to_none=True)  # or optimizer.zero_grad(set_to_none=True)\nmodel.to(device)"})
	}
	if ev.ddpBuckets > 0 && ev.bucketedGrads > 0 {
		// With gradient_as_bucket_view=True each .grad is a view of its
		// bucket: the run already does it when no gradient lives beside them.
		out = append(out, result.Suggestion{ID: "ddp_bucket_view", Title: "Make the gradients views of DDP's buckets (gradient_as_bucket_view=True)",
			Because: fmt.Sprintf("DistributedDataParallel keeps %s of gradient buckets %s and, beside them, %s of the parameters' own gradients: with gradient_as_bucket_view=True each .grad is a view into its bucket, so the gradients are kept once",
				units.FormatBytes(ev.ddpBuckets), where, units.FormatBytes(ev.bucketedGrads)),
			EstimatedSavingsBytes: ev.bucketedGrads, Cost: "none (a .grad can no longer be detached in place: grad.detach_() raises)",
			How: "model = DistributedDataParallel(model, device_ids=[local_rank], gradient_as_bucket_view=True)"})
	}
	if kv := c[result.KVCache]; kv > 0 && ev.Backward {
		out = append(out, result.Suggestion{ID: "use_cache_off", Title: "Turn off the KV cache in training (use_cache=False)",
			Because:               fmt.Sprintf("the run trains and its model builds a key/value cache of %s %s that nothing reads: transformers builds one when use_cache is left on", units.FormatBytes(kv), where),
			EstimatedSavingsBytes: kv, Cost: "none in training",
			How: "model.config.use_cache = False  # or model(input_ids, labels=labels, use_cache=False)"})
	}
	return out
}
