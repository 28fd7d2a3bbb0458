package snapshot_test

import "github.com/torchmem/torchmem/snapshot"

// The facts of the snapshots recorded for this repository on an H200 in
// testdata/estimate/measured, as testdata/facts/snapshot_facts.py
// --measured computes them with Python's own pickle (TestMeasuredSnapshots).
// Regenerate rather than edit.

// Produced by: python3 testdata/facts/snapshot_facts.py --measured
var measuredSnapshotFacts = []fileFacts{
	{
		File:     "cs336_medium_amp_128_training.pickle.gz",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 484, TotalSize: 7484735488, AllocatedSize: 6856229376, ActiveSize: 6856229376,
		BlockStates: map[string]int{"inactive": 152, "active_allocated": 885},
		Devices: []deviceFacts{
			{ID: 0, Segments: 484, Events: 22037, Actions: map[string]int{"alloc": 7493, "free_requested": 7272, "free_completed": 7272}, AllocatedSize: 6856229376, RequestedSize: 6848364548},
		},
		ExternalAnnotations: 2, Annotations: 1,
		HasSettings: true, ExpandableSegments: false,
		Frames: 536, MaxLine: 1790, UnknownLineFrames: 0, FramesSHA256: "980ccaaf7b2b0638",
	},
	{
		File:     "cs336_medium_amp_256_training.pickle.gz",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 438, TotalSize: 8684306432, AllocatedSize: 6867042816, ActiveSize: 6867042816,
		BlockStates: map[string]int{"inactive": 97, "active_allocated": 885},
		Devices: []deviceFacts{
			{ID: 0, Segments: 438, Events: 22331, Actions: map[string]int{"alloc": 7591, "free_requested": 7370, "free_completed": 7370}, AllocatedSize: 6867042816, RequestedSize: 6858686468},
		},
		ExternalAnnotations: 2, Annotations: 1,
		HasSettings: true, ExpandableSegments: false,
		Frames: 538, MaxLine: 1790, UnknownLineFrames: 0, FramesSHA256: "172a3b357540f5d0",
	},
	{
		File:     "generate_llama4l_b2_p128_n24.pickle.gz",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 14, TotalSize: 285212672, AllocatedSize: 257113600, ActiveSize: 257113600,
		BlockStates: map[string]int{"inactive": 16, "active_allocated": 52},
		Devices: []deviceFacts{
			{ID: 0, Segments: 14, Events: 16751, Actions: map[string]int{"alloc": 5589, "free_requested": 5579, "free_completed": 5579, "segment_alloc": 4}, AllocatedSize: 257113600, RequestedSize: 256064128},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: true, ExpandableSegments: false,
		Frames: 111, MaxLine: 4109, UnknownLineFrames: 0, FramesSHA256: "43b78cda1af29b1b",
	},
	{
		File:     "gpt2_fp32_b8_s1024.small.pickle.gz",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 170, TotalSize: 15950938112, AllocatedSize: 1564602368, ActiveSize: 1564602368,
		BlockStates: map[string]int{"inactive": 174, "active_allocated": 449},
		Devices: []deviceFacts{
			{ID: 0, Segments: 170, Events: 9349, Actions: map[string]int{"alloc": 3114, "free_requested": 3113, "free_completed": 3113, "segment_alloc": 9}, AllocatedSize: 1564602368, RequestedSize: 1562491904},
		},
		ExternalAnnotations: 12, Annotations: 6,
		HasSettings: true, ExpandableSegments: false,
		Frames: 545, MaxLine: 5430, UnknownLineFrames: 0, FramesSHA256: "ec5fbc83c0d21959",
	},
	{
		File:     "llama_s_amp_b4_s1024.small.pickle.gz",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 175, TotalSize: 6360662016, AllocatedSize: 1989366784, ActiveSize: 1989366784,
		BlockStates: map[string]int{"inactive": 127, "active_allocated": 230},
		Devices: []deviceFacts{
			{ID: 0, Segments: 175, Events: 10915, Actions: map[string]int{"alloc": 3639, "free_requested": 3638, "free_completed": 3638}, AllocatedSize: 1989366784, RequestedSize: 1935888640},
		},
		ExternalAnnotations: 12, Annotations: 6,
		HasSettings: true, ExpandableSegments: false,
		Frames: 599, MaxLine: 5430, UnknownLineFrames: 0, FramesSHA256: "4cb3ceb48a2bf8e7",
	},
	{
		File:     "qwen05_bf16_b4_s1024.small.pickle.gz",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 332, TotalSize: 18417188864, AllocatedSize: 3048279040, ActiveSize: 3048279040,
		BlockStates: map[string]int{"inactive": 311, "active_allocated": 876},
		Devices: []deviceFacts{
			{ID: 0, Segments: 332, Events: 26955, Actions: map[string]int{"alloc": 8970, "free_requested": 8969, "free_completed": 8969, "segment_alloc": 47}, AllocatedSize: 3048279040, RequestedSize: 3032358272},
		},
		ExternalAnnotations: 12, Annotations: 6,
		HasSettings: true, ExpandableSegments: false,
		Frames: 601, MaxLine: 5430, UnknownLineFrames: 0, FramesSHA256: "f544e75a61a869dc",
	},
}
