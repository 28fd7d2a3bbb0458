package analysis

import (
	"slices"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/result"
)

// recordedTruth is what is known to be true of one recording of
// ../shared/recorded (testdata/facts/recorded_facts.py says where each
// figure comes from). Byte counts are requested (tensor) bytes.
type recordedTruth struct {
	File string
	// Params are the model's parameters; Buffers its buffers and Untold
	// what the program made before the recording without frames that is
	// no weight: the parameter category holds Params, plus at most those.
	Params, Buffers, Untold int64
	OptState                int64 // AdamW's state (0: no optimizer)
	Workspaces              int   // 32 MiB cuBLAS workspaces live at the dump
	// AutocastCopies/AutocastBytes: autocast's weight copies over the run
	// (AutocastCopies −1: not known);
	// KVPeak: the KV cache at the peak; GraphOutput: the CUDA graph's
	// static output in its pool at the dump.
	AutocastCopies        int
	AutocastBytes, KVPeak int64
	GraphOutput           int64
	// DDPBuckets: DistributedDataParallel's gradient buckets over the run,
	// requested bytes in allocation order: the construction's bucket of
	// every gradient, then the rebuilt ones, live at the dump.
	DDPBuckets []int64
}

// TestRecordedTruths checks the categories of every recording PyTorch 2.11
// made in ../shared/recorded against what its program says: parameter
// bytes exact, the optimizer's state, the two 32 MiB cuBLAS workspaces as
// workspace, no gradient left at any dump but DDP's buckets
// (zero_grad(set_to_none=True)), autocast's copies of the mixed-precision
// run in autocast_cache, the KV cache of the LoRA run, the CUDA graph's pool — and advice that follows:
// nothing about gradients for record_train, nothing the mixed run already
// does, use_cache=False for the LoRA run.
func TestRecordedTruths(t *testing.T) {
	for _, want := range recordedTruths {
		t.Run(want.File, func(t *testing.T) {
			s := analysistest.OpenShared(t, "recorded", want.File)
			h := history.Build(s, s.Device(0))
			end := requestedAtEndOf(h)
			if p := end[result.Parameter]; p < want.Params || p > want.Params+want.Buffers+want.Untold {
				t.Errorf("parameter %d B, want %d (+ at most %d of buffers, %d made before the recording)", p, want.Params, want.Buffers, want.Untold)
			}
			if o := end[result.OptimizerState]; o != want.OptState {
				t.Errorf("optimizer_state %d B, want %d", o, want.OptState)
			}
			var buckets int64 // the rebuilt DDP buckets: gradient memory kept for good
			for _, n := range want.DDPBuckets[min(1, len(want.DDPBuckets)):] {
				buckets += n
			}
			if g := end[result.Gradient]; g != buckets {
				t.Errorf("gradient %d B at the dump, want %d: no .grad (zero_grad(set_to_none=True)), only DDP's buckets", g, buckets)
			}
			ws := 0
			for _, b := range h.LiveBlocks(h.EndIndex()) {
				if b.Category == result.Workspace && b.Requested == 32<<20 {
					ws++
				}
			}
			if ws != want.Workspaces {
				t.Errorf("%d workspaces of 32 MiB, want %d", ws, want.Workspaces)
			}
			copies, bytes := 0, int64(0)
			for bi := range h.Blocks {
				if b := &h.Blocks[bi]; b.Category == result.AutocastCache {
					copies++
					bytes += b.Requested
				}
			}
			if want.AutocastCopies >= 0 && (copies != want.AutocastCopies || bytes != want.AutocastBytes) {
				t.Errorf("autocast_cache: %d copies, %d B over the run; want %d, %d", copies, bytes, want.AutocastCopies, want.AutocastBytes)
			}
			r := Analyze(s, DefaultOptions())
			d := r.Devices[0]
			var kv int64
			for _, b := range h.LiveBlocks(d.Peak.EventIndex) {
				if b.Category == result.KVCache {
					kv += b.Requested
				}
			}
			if kv != want.KVPeak {
				t.Errorf("kv_cache at the peak %d B, want %d", kv, want.KVPeak)
			}
			if g := end[result.CUDAGraphPool]; g != want.GraphOutput {
				t.Errorf("cuda_graph_pool at the dump %d B, want the graph's output %d", g, want.GraphOutput)
			}
			ids := suggestionIDs(r)
			switch want.File {
			case "record_train/snapshot_rank0_512.pickle":
				if slices.Contains(ids, "set_to_none") || slices.Contains(ids, "drop_grads_before_move") {
					t.Errorf("suggestions %v: the run keeps no gradient", ids)
				}
			case "hf_llama_mixed_ckpt_train.pickle.gz":
				if slices.Contains(ids, "activation_checkpointing") || slices.Contains(ids, "mixed_precision_bf16") {
					t.Errorf("suggestions %v: the run checkpoints under bf16 autocast already", ids)
				}
			case "hf_llama_lora16_bf16_train.pickle.gz":
				if !slices.Contains(ids, "use_cache_off") || slices.Contains(ids, "qlora") && !slices.Contains(ids, "use_cache_off") {
					t.Errorf("suggestions %v: want use_cache_off (the cache training never reads)", ids)
				}
			}
			checkSavingsAreWhatIfs(t, r)
		})
	}
}

// TestRecordedTruthsCoverRecorded: every snapshot of recorded/ has a row.
func TestRecordedTruthsCoverRecorded(t *testing.T) {
	rows := map[string]bool{}
	for _, r := range recordedTruths {
		rows[r.File] = true
	}
	for _, f := range recordedAllocatedFacts {
		if !rows[f.File] {
			t.Errorf("%s has no row in recordedTruths (rerun testdata/facts/recorded_facts.py)", f.File)
		}
	}
}

// Produced by: python3 testdata/facts/recorded_facts.py
var recordedTruths = []recordedTruth{
	{File: "cuda_graph_inference.pickle.gz", Workspaces: 2, Params: 1074085888, Untold: 65536, GraphOutput: 536870912},
	{File: "estimate/gpt2_fp32_b8_s1024.small.pickle.gz", Workspaces: 2, Params: 497759232, OptState: 995518464},
	{File: "estimate/llama_s_amp_b4_s1024.small.pickle.gz", Workspaces: 2, Params: 622923776, OptState: 1245847552, Buffers: 256, AutocastCopies: -1},
	{File: "hf_llama_lora16_bf16_train.pickle.gz", Workspaces: 2, Params: 320768000, OptState: 18612224, Buffers: 128, KVPeak: 33554432},
	{File: "hf_llama_mixed_ckpt_train.pickle.gz", Workspaces: 2, Params: 622923776, OptState: 1245847552, Buffers: 256, AutocastCopies: 339, AutocastBytes: 1278738432},
	{File: "record_ddp/snapshot_rank0_682.pickle", Workspaces: 2, Params: 100716544, OptState: 201433088, DDPBuckets: []int64{100716544, 33587200, 33574912, 33554432}},
	{File: "record_ddp/snapshot_rank1_683.pickle", Workspaces: 2, Params: 100716544, OptState: 201433088, DDPBuckets: []int64{100716544, 33587200, 33574912, 33554432}},
	{File: "record_oom/oom_snapshot_rank0_590.pickle", Workspaces: 2, Params: 537034752, OptState: 1074069504},
	{File: "record_oom/snapshot_rank0_590.pickle", Workspaces: 2, Params: 537034752, OptState: 1074069504},
	{File: "record_trace/snapshot_rank0_824.pickle", Workspaces: 2, Params: 100716544, OptState: 201433088},
	{File: "record_train/snapshot_rank0_512.pickle", Workspaces: 2, Params: 100716544, OptState: 201433088},
}
