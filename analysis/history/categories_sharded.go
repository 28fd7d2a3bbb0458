package history

import (
	"strings"

	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// Rules for sharded data parallelism (PyTorch's FSDP, fully_shard and
// FullyShardedDataParallel, and DeepSpeed's ZeRO): each rank keeps a shard
// of every parameter, gathers a module's whole parameters into buffers of
// its own before the module's forward and again before its backward, and
// frees them after; backward's gradients are copied into a flat buffer for
// the reduce-scatter, which leaves each rank the shard of the gradients it
// keeps.
//
// RuleShardedParameters are the shards and what the framework allocates
// for them outside forward and backward; RuleShardedGathered the
// parameters gathered for a module's forward or backward — weights, never
// activations: their size is the module's, whatever the batch, and the
// optimizer's state is not counted against them; RuleShardedGradients the
// reduce-scatter's buffers and the gradient shards it makes;
// RuleShardedMaster the fp32 master copies of the shards (ZeRO's
// partitions), optimizer state.
const (
	RuleShardedParameters = "sharded_parameters"
	RuleShardedGathered   = "sharded_parameters_gathered"
	RuleShardedGradients  = "sharded_gradients"
	RuleShardedMaster     = "sharded_fp32_master"
)

// What a sharding framework's frame says its allocation is.
const (
	shardNone   uint8 = iota // not the framework's, or not one of its buffers (a module's forward it wraps, inputs it moves)
	shardParam               // parameters: shards, gathered or cast for the all-gather
	shardGrad                // gradients: reduce-scatter buffers and shards
	shardMaster              // fp32 master copies of the shards
	shardFramed              // none of them, by the framework's own frame: its spans are not read
)

// IsShardingFrame reports whether a frame is a sharding framework's: a
// Python file of PyTorch's FSDP (fully_shard, FullyShardedDataParallel) or
// of DeepSpeed's ZeRO, or one of the profiler spans FSDP records
// ("FSDP::all_gather (layers.0)", "FullyShardedDataParallel._pre_forward").
func IsShardingFrame(f *snapshot.Frame) bool {
	if !IsPython(f) {
		return strings.HasPrefix(f.Name, "FSDP::") || strings.HasPrefix(f.Name, "FullyShardedDataParallel.")
	}
	file := strings.ReplaceAll(f.Filename, "\\", "/")
	return strings.Contains(file, "torch/distributed/fsdp/") || strings.Contains(file, "torch/distributed/_composable/fsdp/") ||
		strings.Contains(file, "deepspeed/runtime/zero/")
}

// shardingKind is what a sharding framework's frame says its allocation
// is. ok is false for any other frame, and for the framework's helpers
// that allocate for all its buffers alike (allocate, alloc_storage, a
// constructor): a frame further out decides.
func shardingKind(f *snapshot.Frame) (kind uint8, ok bool) {
	if !IsPython(f) {
		rest, ok := strings.CutPrefix(f.Name, "FSDP::")
		if !ok {
			if rest, ok = strings.CutPrefix(f.Name, "FullyShardedDataParallel."); !ok {
				return shardNone, false
			}
		}
		low := strings.ToLower(rest)
		switch {
		case strings.Contains(low, "root_pre_forward") || low == "forward":
			return shardNone, true // the root's inputs, the module's own forward
		case strings.Contains(low, "post_backward") || strings.Contains(low, "reduce"):
			return shardGrad, true
		case strings.Contains(low, "pre_forward") || strings.Contains(low, "pre_backward") || strings.Contains(low, "post_forward"):
			return shardParam, true // the spans that unshard and reshard
		}
		return shardingFunction(low)
	}
	if !IsShardingFrame(f) {
		return shardNone, false
	}
	return shardingFunction(strings.ToLower(f.Name))
}

// shardingFunction is what a sharding framework's function (its name in
// lower case) allocates: the gradients' reduction, the fp32 master
// partitions, the gathering, sharding and casting of parameters — or none
// of them (its hooks around a module's forward or backward, the inputs it
// moves). ok is false for a helper that allocates for any of them.
func shardingFunction(low string) (kind uint8, ok bool) {
	switch {
	case strings.Contains(low, "reduce") || strings.Contains(low, "grad"):
		return shardGrad, true
	case strings.Contains(low, "fp32") || strings.Contains(low, "master"):
		return shardMaster, true
	case strings.Contains(low, "gather") || strings.Contains(low, "shard") || strings.Contains(low, "flat_param") ||
		strings.Contains(low, "fetch") || strings.Contains(low, "partition") || strings.Contains(low, "low_precision") ||
		strings.Contains(low, "flatten"):
		return shardParam, true
	case strings.Contains(low, "alloc") || strings.HasPrefix(low, "__") || strings.Contains(low, "storage"):
		return shardNone, false
	}
	return shardNone, true
}

// shardedBuffers classifies into out the blocks a sharding framework's
// innermost frame names — or, where no frame of it does, the innermost of
// its profiler spans (record_function ranges: FSDP's "FSDP::all_gather",
// "FSDP::post_backward_reduce"…, which a snapshot keeps among its
// annotations) around the allocation: parameters (gathered when allocated
// in forward or backward), gradients and fp32 master copies.
func shardedBuffers(h *History, facts []blockFacts, out map[int]decision) {
	var spans []interval
	for _, a := range h.Snap.Annotations {
		kind, ok := shardingKind(&snapshot.Frame{Name: a.Name})
		if !ok || a.StartNS == snapshot.NoTime || a.EndNS == snapshot.NoTime {
			continue
		}
		spans = append(spans, interval{start: a.StartNS, end: a.EndNS, Code: kind})
	}
	var inSpan []int32 // the innermost span of each event (−1)
	if len(spans) > 0 {
		inSpan = innermost(h.Device.Events, spans, make([]int32, len(h.Device.Events)))
	}
	for i := range facts {
		f := &facts[i]
		kind := f.m.sharded
		if b := &h.Blocks[i]; kind == shardNone && inSpan != nil && b.Alloc >= 0 && !b.Untracked {
			if k := inSpan[b.Alloc]; k >= 0 {
				kind = spans[k].Code
			}
		}
		switch kind {
		case shardParam:
			if f.ac == codeForward || f.ac == CodeBackward {
				out[i] = decision{result.Parameter, RuleShardedGathered, result.High}
			} else {
				out[i] = decision{result.Parameter, RuleShardedParameters, result.High}
			}
		case shardGrad:
			out[i] = decision{result.Gradient, RuleShardedGradients, result.High}
		case shardMaster:
			out[i] = decision{result.OptimizerState, RuleShardedMaster, result.High}
		}
	}
}
