package analysis

// The allocated bytes and OOMs of the snapshots PyTorch 2.11 wrote in
// ../shared/recorded, from Python's own replay of each file
// (TestRealFilesAllocated, TestRealFilesOOMAllocated). Regenerate rather
// than edit.

// Produced by: python3 testdata/facts/snapshot_facts.py --recorded --analysis
var recordedAllocatedFacts = []allocatedFacts{
	{File: "cuda_graph_inference.pickle.gz", Device: 0, EndAllocated: 1680229376, EndRequested: 1680228368, PeakAllocated: 1747338240, PeakEvent: 302, PeakRequested: 1747337232, Unsized: 0},
	{File: "estimate/gpt2_fp32_b8_s1024.small.pickle.gz", Device: 0, EndAllocated: 1564864512, EndRequested: 1562491904, PeakAllocated: 3266137088, PeakEvent: 572, PeakRequested: 3263763464, Unsized: 0},
	{File: "estimate/llama_s_amp_b4_s1024.small.pickle.gz", Device: 0, EndAllocated: 1989366784, EndRequested: 1935888640, PeakAllocated: 3249894400, PeakEvent: 3336, PeakRequested: 3181736192, Unsized: 0},
	{File: "hf_llama_lora16_bf16_train.pickle.gz", Device: 0, EndAllocated: 408620032, EndRequested: 406521984, PeakAllocated: 4164104192, PeakEvent: 7104, PeakRequested: 4160948488, Unsized: 0},
	{File: "hf_llama_mixed_ckpt_train.pickle.gz", Device: 0, EndAllocated: 1972090368, EndRequested: 1935913220, PeakAllocated: 3787200512, PeakEvent: 6414, PeakRequested: 3751022856, Unsized: 0},
	{File: "record_ddp/snapshot_rank0_682.pickle", Device: 0, EndAllocated: 471056896, EndRequested: 471056388, PeakAllocated: 1041482752, PeakEvent: 233, PeakRequested: 1041481736, Unsized: 0},
	{File: "record_ddp/snapshot_rank1_683.pickle", Device: 0, EndAllocated: 471089664, EndRequested: 471089156, PeakAllocated: 1611940864, PeakEvent: 232, PeakRequested: 1611939848, Unsized: 0},
	{File: "record_oom/oom_snapshot_rank0_590.pickle", Device: 0, EndAllocated: 4363616768, EndRequested: 4363616260, PeakAllocated: 4632061440, PeakEvent: 384, PeakRequested: 4632059976, Unsized: 0},
	{File: "record_oom/snapshot_rank0_590.pickle", Device: 0, EndAllocated: 4363616768, EndRequested: 4363616260, PeakAllocated: 4632061440, PeakEvent: 384, PeakRequested: 4632059976, Unsized: 0},
	{File: "record_trace/snapshot_rank0_824.pickle", Device: 0, EndAllocated: 638808576, EndRequested: 638808068, PeakAllocated: 1779659776, PeakEvent: 202, PeakRequested: 1779658760, Unsized: 0},
	{File: "record_train/snapshot_rank0_512.pickle", Device: 0, EndAllocated: 638808576, EndRequested: 638808068, PeakAllocated: 1779659776, PeakEvent: 202, PeakRequested: 1779658760, Unsized: 0},
}

// At each oom entry: allocated (blocks) and requested bytes, and the blocks
// made by Module.to (module.py _apply/convert frames) and by attention
// (scaled_dot_product frames).
var recordedOOMFacts = []oomFacts{
	{File: "record_oom/oom_snapshot_rank0_590.pickle", Device: 0, Event: 619, Allocated: 4363616768, Requested: 4363616260, ModuleTo: 537034752, ModuleToBlocks: 16, Attention: 0, AttentionRequested: 0},
	{File: "record_oom/snapshot_rank0_590.pickle", Device: 0, Event: 619, Allocated: 4363616768, Requested: 4363616260, ModuleTo: 537034752, ModuleToBlocks: 16, Attention: 0, AttentionRequested: 0},
}
