package snapshot_test

import "github.com/torchmem/torchmem/snapshot"

// The facts of the snapshots PyTorch 2.11 wrote in ../shared/recorded, as
// testdata/facts/snapshot_facts.py --recorded computes them with Python's
// own pickle (TestRecordedSnapshots). Regenerate rather than edit.

// Produced by: python3 testdata/facts/snapshot_facts.py --recorded
var recordedSnapshotFacts = []fileFacts{
	{
		File:     "cuda_graph_inference.pickle.gz",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 26, TotalSize: 2625634304, AllocatedSize: 1680229376, ActiveSize: 1680229376,
		BlockStates: map[string]int{"inactive": 9, "active_allocated": 46},
		Devices: []deviceFacts{
			{ID: 0, Segments: 26, Events: 432, Actions: map[string]int{"alloc": 141, "free_requested": 134, "free_completed": 134, "segment_alloc": 17, "segment_free": 6}, AllocatedSize: 1680229376, RequestedSize: 1680228368},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: true, ExpandableSegments: false,
		Frames: 21, MaxLine: 2935, UnknownLineFrames: 0, FramesSHA256: "58b098db02e270c0",
	},
	{
		File:     "estimate/gpt2_fp32_b8_s1024.small.pickle.gz",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 178, TotalSize: 15961423872, AllocatedSize: 1564864512, ActiveSize: 1564864512,
		BlockStates: map[string]int{"inactive": 182, "active_allocated": 449},
		Devices: []deviceFacts{
			{ID: 0, Segments: 178, Events: 9349, Actions: map[string]int{"alloc": 3114, "free_requested": 3113, "free_completed": 3113, "segment_alloc": 9}, AllocatedSize: 1564864512, RequestedSize: 1562491904},
		},
		ExternalAnnotations: 12, Annotations: 6,
		HasSettings: true, ExpandableSegments: false,
		Frames: 545, MaxLine: 5430, UnknownLineFrames: 0, FramesSHA256: "db97c09a4c48f7b8",
	},
	{
		File:     "estimate/llama_s_amp_b4_s1024.small.pickle.gz",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 175, TotalSize: 6360662016, AllocatedSize: 1989366784, ActiveSize: 1989366784,
		BlockStates: map[string]int{"inactive": 127, "active_allocated": 230},
		Devices: []deviceFacts{
			{ID: 0, Segments: 175, Events: 10915, Actions: map[string]int{"alloc": 3639, "free_requested": 3638, "free_completed": 3638}, AllocatedSize: 1989366784, RequestedSize: 1935888640},
		},
		ExternalAnnotations: 12, Annotations: 6,
		HasSettings: true, ExpandableSegments: false,
		Frames: 599, MaxLine: 5430, UnknownLineFrames: 0, FramesSHA256: "2bdad749fbcb169a",
	},
	{
		File:     "hf_llama_lora16_bf16_train.pickle.gz",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 121, TotalSize: 4563402752, AllocatedSize: 408620032, ActiveSize: 408620032,
		BlockStates: map[string]int{"inactive": 114, "active_allocated": 416},
		Devices: []deviceFacts{
			{ID: 0, Segments: 121, Events: 20653, Actions: map[string]int{"alloc": 7002, "free_requested": 6775, "free_completed": 6775, "segment_alloc": 101}, AllocatedSize: 408620032, RequestedSize: 406521984},
		},
		ExternalAnnotations: 16, Annotations: 8,
		HasSettings: true, ExpandableSegments: false,
		Frames: 87, MaxLine: 5430, UnknownLineFrames: 0, FramesSHA256: "6165b82b2abad856",
	},
	{
		File:     "hf_llama_mixed_ckpt_train.pickle.gz",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 102, TotalSize: 4827643904, AllocatedSize: 1972090368, ActiveSize: 1972090368,
		BlockStates: map[string]int{"inactive": 56, "active_allocated": 231},
		Devices: []deviceFacts{
			{ID: 0, Segments: 102, Events: 14858, Actions: map[string]int{"alloc": 5033, "free_requested": 4879, "free_completed": 4879, "segment_alloc": 67}, AllocatedSize: 1972090368, RequestedSize: 1935913220},
		},
		ExternalAnnotations: 12, Annotations: 6,
		HasSettings: true, ExpandableSegments: false,
		Frames: 91, MaxLine: 5430, UnknownLineFrames: 0, FramesSHA256: "5e7ce79f581803b4",
	},
	{
		File:     "record_ddp/snapshot_rank0_682.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 15, TotalSize: 1222639616, AllocatedSize: 471056896, ActiveSize: 471056896,
		BlockStates: map[string]int{"inactive": 11, "active_allocated": 29},
		Devices: []deviceFacts{
			{ID: 0, Segments: 15, Events: 815, Actions: map[string]int{"alloc": 286, "free_requested": 257, "free_completed": 257, "segment_alloc": 15}, AllocatedSize: 471056896, RequestedSize: 471056388},
		},
		ExternalAnnotations: 66, Annotations: 33,
		HasSettings: true, ExpandableSegments: false,
		Frames: 45, MaxLine: 3504, UnknownLineFrames: 0, FramesSHA256: "a71858574dd00eed",
	},
	{
		File:     "record_ddp/snapshot_rank1_683.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 13, TotalSize: 1650458624, AllocatedSize: 471089664, ActiveSize: 471089664,
		BlockStates: map[string]int{"inactive": 11, "active_allocated": 29},
		Devices: []deviceFacts{
			{ID: 0, Segments: 13, Events: 813, Actions: map[string]int{"alloc": 286, "free_requested": 257, "free_completed": 257, "segment_alloc": 13}, AllocatedSize: 471089664, RequestedSize: 471089156},
		},
		ExternalAnnotations: 66, Annotations: 33,
		HasSettings: true, ExpandableSegments: false,
		Frames: 45, MaxLine: 3504, UnknownLineFrames: 0, FramesSHA256: "a71858574dd00eed",
	},
	{
		File:     "record_oom/oom_snapshot_rank0_590.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 22, TotalSize: 4368367616, AllocatedSize: 4363616768, ActiveSize: 4363616768,
		BlockStates: map[string]int{"inactive": 4, "active_allocated": 54},
		Devices: []deviceFacts{
			{ID: 0, Segments: 22, Events: 620, Actions: map[string]int{"alloc": 215, "free_requested": 161, "free_completed": 161, "segment_alloc": 52, "segment_free": 30, "oom": 1}, AllocatedSize: 4363616768, RequestedSize: 4363616260},
		},
		OOMs: []oomFact{
			{Device: 0, Index: 619, Size: 2147483648, DeviceFree: 143977349120},
		},
		ExternalAnnotations: 8, Annotations: 4,
		HasSettings: true, ExpandableSegments: false,
		Frames: 30, MaxLine: 1790, UnknownLineFrames: 0, FramesSHA256: "0008bb79c0cd7833",
	},
	{
		File:     "record_oom/snapshot_rank0_590.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 22, TotalSize: 4368367616, AllocatedSize: 4363616768, ActiveSize: 4363616768,
		BlockStates: map[string]int{"inactive": 4, "active_allocated": 54},
		Devices: []deviceFacts{
			{ID: 0, Segments: 22, Events: 621, Actions: map[string]int{"alloc": 215, "free_requested": 161, "free_completed": 161, "segment_alloc": 52, "segment_free": 30, "snapshot": 1, "oom": 1}, AllocatedSize: 4363616768, RequestedSize: 4363616260},
		},
		OOMs: []oomFact{
			{Device: 0, Index: 619, Size: 2147483648, DeviceFree: 143977349120},
		},
		ExternalAnnotations: 8, Annotations: 4,
		HasSettings: true, ExpandableSegments: false,
		Frames: 30, MaxLine: 1790, UnknownLineFrames: 0, FramesSHA256: "0008bb79c0cd7833",
	},
	{
		File:     "record_trace/snapshot_rank0_824.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 15, TotalSize: 1814036480, AllocatedSize: 638808576, ActiveSize: 638808576,
		BlockStates: map[string]int{"inactive": 12, "active_allocated": 27},
		Devices: []deviceFacts{
			{ID: 0, Segments: 15, Events: 1233, Actions: map[string]int{"alloc": 424, "free_requested": 397, "free_completed": 397, "segment_alloc": 15}, AllocatedSize: 638808576, RequestedSize: 638808068},
		},
		ExternalAnnotations: 41, Annotations: 21,
		HasSettings: true, ExpandableSegments: false,
		Frames: 34, MaxLine: 3504, UnknownLineFrames: 0, FramesSHA256: "818c7f0d60d00574",
	},
	{
		File:     "record_train/snapshot_rank0_512.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 15, TotalSize: 1814036480, AllocatedSize: 638808576, ActiveSize: 638808576,
		BlockStates: map[string]int{"inactive": 12, "active_allocated": 27},
		Devices: []deviceFacts{
			{ID: 0, Segments: 15, Events: 933, Actions: map[string]int{"alloc": 324, "free_requested": 297, "free_completed": 297, "segment_alloc": 15}, AllocatedSize: 638808576, RequestedSize: 638808068},
		},
		ExternalAnnotations: 24, Annotations: 12,
		HasSettings: true, ExpandableSegments: false,
		Frames: 34, MaxLine: 3504, UnknownLineFrames: 0, FramesSHA256: "818c7f0d60d00574",
	},
}
