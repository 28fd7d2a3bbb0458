package history

import (
	"testing"

	"github.com/torchmem/torchmem/snapshot"
)

// TestShardingKind: what a sharding framework's frame says of the memory
// allocated under it — FSDP2's (fully_shard), FSDP1's and DeepSpeed ZeRO's
// functions, FSDP's profiler spans — and that its helpers let a frame
// further out decide, its hooks around a module's forward decide "none of
// its buffers", and every other frame is not its.
func TestShardingKind(t *testing.T) {
	const fsdp2, fsdp1, zero = "/usr/lib/python3/site-packages/torch/distributed/fsdp/_fully_shard/", "/opt/torch/distributed/fsdp/", "/home/u/deepspeed/runtime/zero/"
	for _, tc := range []struct {
		file, name string
		kind       uint8
		ok         bool
	}{
		{fsdp2 + "_fsdp_collectives.py", "foreach_all_gather", shardParam, true},
		{fsdp2 + "_fsdp_collectives.py", "foreach_all_gather_copy_out", shardParam, true},
		{fsdp2 + "_fsdp_collectives.py", "foreach_reduce", shardGrad, true},
		{fsdp2 + "_fsdp_collectives.py", "allocate", shardNone, false},
		{fsdp2 + "_fsdp_param.py", "alloc_storage", shardNone, false},
		{fsdp2 + "_fsdp_param.py", "_init_sharded_param", shardParam, true},
		{fsdp2 + "_fsdp_param.py", "to_accumulated_grad_if_needed", shardGrad, true},
		{fsdp2 + "_fsdp_state.py", "_pre_forward", shardNone, true},
		{"C:\\envs\\torch\\distributed\\_composable\\fsdp\\_fsdp_collectives.py", "foreach_all_gather", shardParam, true},
		{fsdp1 + "_flat_param.py", "_alloc_padded_unsharded_flat_param", shardParam, true},
		{fsdp1 + "_flat_param.py", "_use_low_precision_shard", shardParam, true},
		{fsdp1 + "_runtime_utils.py", "_reduce_grad", shardGrad, true},
		{fsdp1 + "fully_sharded_data_parallel.py", "forward", shardNone, true},
		{zero + "partition_parameters.py", "_allgather_params_coalesced", shardParam, true},
		{zero + "stage3.py", "__reduce_and_partition_ipg_grads", shardGrad, true},
		{zero + "stage3.py", "_create_fp32_partitions", shardMaster, true},
		{zero + "stage_1_and_2.py", "__init__", shardNone, false},
		{"", "FSDP::all_gather (layers.0)", shardParam, true},
		{"", "FSDP::all_gather_copy_out (layers.3.mlp)", shardParam, true},
		{"", "FSDP::pre_backward (layers.1)", shardParam, true},
		{"", "FSDP::post_backward_reduce (layers.1)", shardGrad, true},
		{"", "FSDP::root_pre_forward", shardNone, true},
		{"", "FullyShardedDataParallel._pre_forward_unshard", shardParam, true},
		{"", "FullyShardedDataParallel._post_backward_hook", shardGrad, true},
		{"", "FullyShardedDataParallel.forward", shardNone, true},
		{"", "ProfilerStep#3", shardNone, false},
		{"", "c10d::Reducer::initialize_buckets(std::vector<c10d::Reducer::Bucket>)", shardNone, false},
		{"/opt/torch/nn/parallel/distributed.py", "forward", shardNone, false},
		{"/home/u/train.py", "all_gather_shards", shardNone, false},
	} {
		f := &snapshot.Frame{Filename: tc.file, Name: tc.name}
		if kind, ok := shardingKind(f); kind != tc.kind || ok != tc.ok {
			t.Errorf("%s %s: kind %d, ok %v; want %d, %v", tc.file, tc.name, kind, ok, tc.kind, tc.ok)
		}
		// the framework's frames: those that decide, and its helpers
		helper := tc.file != "" && (tc.name == "allocate" || tc.name == "alloc_storage" || tc.name == "__init__")
		if got, want := IsShardingFrame(f), tc.ok || helper; got != want {
			t.Errorf("%s %s: a sharding framework's frame %v, want %v", tc.file, tc.name, got, want)
		}
	}
}
