package analysis

import (
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/result"
)

// TestRealOOMs checks the post-mortem of the two real OOM snapshots.
//
// The frames were read by hand (python3 pickle):
//
//   - Nesta (Lightning, torch 2.2, stacks="all"): the oom entry is event 1117
//     of 1299 on device 0 (402,653,184 B requested, 264,634,368 B free; the
//     dump was taken in an `except OutOfMemoryError` handler, so Lightning's
//     teardown frees follow). Its C++ frames are at::native::softmax under
//     _scaled_dot_product_attention_math (SDPA's math backend); its Python
//     frames, innermost first: timm/models/vision_transformer.py:93 forward
//     (site-packages), torch/nn/modules/module.py _call_impl, then the
//     user's dit.py:125 forward — the site — under language_diff_module.py
//     forward/training_step, Lightning's closure, and torch/optim/adam.py
//     step (optimizer.step(closure) runs forward inside the step: the phase
//     is forward, not optimizer). No optimizer step completed before it.
//     snapshot_facts.py --analysis (realOOMFacts) gives 23,279,878,144 B
//     allocated in blocks (23,273,455,056 B requested) and 23,297,261,568 B
//     reserved at the oom (no block predates the trace); the model's
//     Module.to(device) allocations (module.py convert/_apply frames) still
//     live then sum to 135,833,600 B of blocks in 132 blocks (130,328,016 B
//     requested); live blocks with scaled_dot_product frames sum to
//     7,046,430,720 B (blocks and requested alike).
//   - Constructor-Sun (torch 2.8, DataParallel over 3 GPUs, expandable
//     segments): device 1, event 421 of 596, 5,308,694,528 B requested,
//     95,682,560 B free. Frames: at::native::relu (clamp_min) under
//     torch/nn/functional.py:1701 relu, then the user's models.py:181
//     update_nodes — the site — in models.py:231 forward via module.py
//     _call_impl in parallel_apply.py _worker. Replay: 84,063,358,976 B
//     allocated in blocks (84,063,351,764 B requested), 84,202,749,952 B
//     reserved at the oom.
func TestRealOOMs(t *testing.T) {
	tests := []struct {
		file                     string
		device, index            int
		requested, free          int64
		allocated, reserved      int64
		phase                    result.Phase
		step                     int
		site                     string
		stackHas                 string
		params                   int64
		atLeastActivationPct     int64
		wantSuggest, dontSuggest []string
		verdictHas               []string
		// cached free and largest free block at the oom
		// (testdata/facts/allocator_state_facts.py): a rest of at most
		// 1 MiB in a large segment belongs to its block.
		cachedFree, largestFree int64
	}{
		{
			file: "genC_torch2.2_nesta_OOM_pickle_named_json.pickle", device: 0, index: 1117,
			requested: 402_653_184, free: 264_634_368, allocated: 23_279_878_144, reserved: 23_297_261_568,
			phase: result.PhaseForward, step: 0, site: "dit.py:125 forward", stackHas: "vision_transformer.py:93 forward",
			params: 135_833_600, atLeastActivationPct: 90,
			// forward OOM, activations dominate, and the failing allocation is
			// SDPA's math backend: checkpointing, smaller micro-batches and a
			// fused attention kernel fit; nothing about the optimizer or
			// fragmentation (17 MiB cached free against 384 MiB asked).
			wantSuggest: []string{"activation_checkpointing", "gradient_accumulation", "flash_attention"},
			dontSuggest: []string{"optimizer_8bit", "paged_optimizer", "cpu_offload", "expandable_segments", "empty_cache", "qlora"},
			// event 1116, just before the oom, is a segment_free of 100,663,296 B
			verdictHas: []string{"forward", "dit.py:125 forward", "384 MiB requested", "252 MiB free", "math backend", "released 96.0 MiB of cached segments"},
			// 18,300,928 when the 0.875 MiB rest of a block was counted free
			cachedFree: 17_383_424, largestFree: 10_092_544,
		},
		{
			file: "genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle", device: 1, index: 421,
			requested: 5_308_694_528, free: 95_682_560, allocated: 84_063_358_976, reserved: 84_202_749_952,
			phase: result.PhaseForward, step: 0, site: "models.py:181 update_nodes", stackHas: "functional.py:1701 relu",
			params: 0, atLeastActivationPct: 99,
			// expandable segments are already on: never suggest them.
			wantSuggest: []string{"activation_checkpointing", "gradient_accumulation"},
			dontSuggest: []string{"expandable_segments", "optimizer_8bit", "flash_attention", "empty_cache", "qlora"},
			verdictHas:  []string{"forward", "models.py:181 update_nodes", "4.94 GiB requested", "91.2 MiB free"},
			cachedFree:  139_390_976, largestFree: 17_313_792,
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			s := analysistest.OpenShared(t, "snapshots", tc.file)
			r := Analyze(s, DefaultOptions())
			var oomDevs []int
			var o *result.OOM
			for i := range r.Devices {
				if r.Devices[i].OOM != nil {
					oomDevs = append(oomDevs, r.Devices[i].Device)
					o = r.Devices[i].OOM
				}
			}
			if len(oomDevs) != 1 || oomDevs[0] != tc.device {
				t.Fatalf("OOM on devices %v, want [%d]", oomDevs, tc.device)
			}
			if o.EventIndex != tc.index || o.RequestedBytes != tc.requested || o.DeviceFreeBytes != tc.free {
				t.Errorf("oom at %d: %d requested, %d free; want %d: %d, %d", o.EventIndex, o.RequestedBytes, o.DeviceFreeBytes, tc.index, tc.requested, tc.free)
			}
			if o.AllocatedBytes != tc.allocated || o.ReservedBytes != tc.reserved {
				t.Errorf("at the oom %d allocated, %d reserved; want %d, %d", o.AllocatedBytes, o.ReservedBytes, tc.allocated, tc.reserved)
			}
			if o.Phase != tc.phase || o.Step != tc.step || o.Site != tc.site {
				t.Errorf("oom in %s step %d at %q, want %s step %d at %q", o.Phase, o.Step, o.Site, tc.phase, tc.step, tc.site)
			}
			if len(o.Stack) == 0 || o.Stack[0] != tc.stackHas {
				t.Errorf("stack starts %q, want %q", o.Stack, tc.stackHas)
			}
			if o.Categories.Total() != o.AllocatedBytes {
				t.Errorf("categories sum to %d, allocated %d", o.Categories.Total(), o.AllocatedBytes)
			}
			if o.Categories[result.Parameter] != tc.params {
				t.Errorf("parameters at the oom %d, want %d", o.Categories[result.Parameter], tc.params)
			}
			if act := o.Categories[result.Activation] + o.Categories[result.Temporary]; act*100 < tc.atLeastActivationPct*o.AllocatedBytes {
				t.Errorf("activations %d of %d allocated, want at least %d%%", act, o.AllocatedBytes, tc.atLeastActivationPct)
			}
			if fr := o.Fragmentation; fr.CachedFreeBytes != tc.cachedFree || fr.LargestFreeBlockBytes != tc.largestFree {
				t.Errorf("cached free %d, largest free block %d; want %d, %d", fr.CachedFreeBytes, fr.LargestFreeBlockBytes, tc.cachedFree, tc.largestFree)
			}
			if fr := o.Fragmentation; fr.Fragmented || fr.CachedFreeBytes >= tc.requested || fr.CachedFreeBytes > o.ReservedBytes-o.AllocatedBytes+int64(len(s.Device(tc.device).Events))*512 {
				t.Errorf("fragmentation %+v: the cache cannot hold %d bytes here", fr, tc.requested)
			}
			var byPhase int64
			for _, pb := range o.LiveByPhase {
				byPhase += pb.Bytes
			}
			if byPhase != o.AllocatedBytes || len(o.LiveByPhase) == 0 || o.LiveByPhase[0].Phase != result.PhaseForward {
				t.Errorf("live by phase %+v: want forward first, summing to %d", o.LiveByPhase, o.AllocatedBytes)
			}
			if len(o.TopSites) == 0 || o.TopSites[0].Category != result.Activation {
				t.Errorf("top sites at the oom %+v, want activation first", o.TopSites)
			}
			ids := make([]string, len(r.Suggestions))
			for i, sg := range r.Suggestions {
				ids[i] = sg.ID
				if sg.EstimatedSavingsBytes <= 0 || sg.Because == "" || sg.How == "" || sg.Cost == "" {
					t.Errorf("suggestion %s lacks evidence: %+v", sg.ID, sg)
				}
				if i > 0 && sg.EstimatedSavingsBytes > r.Suggestions[i-1].EstimatedSavingsBytes {
					t.Errorf("suggestions not ranked by savings: %v", ids)
				}
			}
			for _, id := range tc.wantSuggest {
				if !slices.Contains(ids, id) {
					t.Errorf("suggestions %v lack %s", ids, id)
				}
			}
			for _, id := range tc.dontSuggest {
				if slices.Contains(ids, id) {
					t.Errorf("suggestions %v include %s", ids, id)
				}
			}
			for _, w := range tc.verdictHas {
				if !strings.Contains(o.Verdict, w) {
					t.Errorf("verdict %q lacks %q", o.Verdict, w)
				}
			}
		})
	}
}

// TestNestaAttentionEvidence checks the flash_attention suggestion's
// numbers: the failing allocation is the SDPA math backend and the
// attention tensors live at the oom are the 7,046,430,720 B with
// scaled_dot_product frames (python replay).
func TestNestaAttentionEvidence(t *testing.T) {
	s := analysistest.OpenShared(t, "snapshots", "genC_torch2.2_nesta_OOM_pickle_named_json.pickle")
	r := Analyze(s, DefaultOptions())
	for _, sg := range r.Suggestions {
		if sg.ID != "flash_attention" {
			continue
		}
		// The saving is the what-if's: the run's peak under a fused kernel
		// (its seq² tensors at a fifth) — of the 7,046,430,720 B that
		// attention code holds at the OOM, the what-if scales the tensors
		// with two sequence dimensions only, so it saves less than 4/5.
		var projected int64
		for _, p := range r.WhatIf.Suggestions {
			if p.ID == sg.ID {
				projected = p.SavingBytes
			}
		}
		if high := int64(7_046_430_720) * 4 / 5; sg.EstimatedSavingsBytes != projected || projected <= 0 || projected > high {
			t.Errorf("flash_attention saves %d, the what-if %d; want the what-if's, above 0, at most 4/5 of 7,046,430,720 = %d", sg.EstimatedSavingsBytes, projected, high)
		}
		if !strings.Contains(sg.Because, "math backend") {
			t.Errorf("because %q does not name the math backend", sg.Because)
		}
		return
	}
	t.Fatal("no flash_attention suggestion")
}
