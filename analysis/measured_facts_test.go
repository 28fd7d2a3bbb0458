package analysis

// The allocated bytes of the snapshots recorded for this repository on an
// H200 in testdata/estimate/measured (TestRealFilesAllocated), as
// testdata/facts/snapshot_facts.py --measured --analysis computes them.
// Regenerate rather than edit.

// Produced by: python3 testdata/facts/snapshot_facts.py --measured --analysis
var measuredAllocatedFacts = []allocatedFacts{
	{File: "cs336_medium_amp_128_training.pickle.gz", Device: 0, EndAllocated: 6856229376, EndRequested: 6848364548, PeakAllocated: 7151442944, PeakEvent: 3485, PeakRequested: 7143331848, Unsized: 0},
	{File: "cs336_medium_amp_256_training.pickle.gz", Device: 0, EndAllocated: 6867042816, EndRequested: 6858686468, PeakAllocated: 8628175872, PeakEvent: 3485, PeakRequested: 8618344456, Unsized: 0},
	{File: "generate_llama4l_b2_p128_n24.pickle.gz", Device: 0, EndAllocated: 257113600, EndRequested: 256064128, PeakAllocated: 263812096, PeakEvent: 562, PeakRequested: 262367528, Unsized: 0},
	{File: "gpt2_fp32_b8_s1024.small.pickle.gz", Device: 0, EndAllocated: 1564602368, EndRequested: 1562491904, PeakAllocated: 3267447808, PeakEvent: 572, PeakRequested: 3263763464, Unsized: 0},
	{File: "llama_s_amp_b4_s1024.small.pickle.gz", Device: 0, EndAllocated: 1989366784, EndRequested: 1935888640, PeakAllocated: 3249894400, PeakEvent: 3336, PeakRequested: 3181736192, Unsized: 0},
	{File: "qwen05_bf16_b4_s1024.small.pickle.gz", Device: 0, EndAllocated: 3048279040, EndRequested: 3032358272, PeakAllocated: 5044329472, PeakEvent: 7854, PeakRequested: 5008489344, Unsized: 0},
}
