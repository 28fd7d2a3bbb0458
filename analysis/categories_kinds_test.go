package analysis

import (
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/result"
)

// The figures below are the output of testdata/facts/category_facts.py
// (Python's pickle, gzip and json; see its docstring for how each is read).

// TestBcraftonGradientsFromBeforeRecording: an AdamW step without
// zero_grad, the gradients accumulating into .grad tensors made before the
// recording. AdamW keeps two tensors per parameter, so the 222 state
// tensors stand for 111 parameters, and the 222 untraced blocks of their
// sizes are 111 parameters and 111 gradients — 761,840,640 B requested
// each — not 222 parameters (optimizer state 1.0× parameters is impossible
// for AdamW).
func TestBcraftonGradientsFromBeforeRecording(t *testing.T) {
	s := analysistest.OpenShared(t, "snapshots", "genG_torch2.10x_bcrafton.pickle")
	h := history.Build(s, s.Devices[0])
	end := h.EndIndex()
	got := h.CategoriesAt(end)
	want := result.Categories{result.Parameter: 763_440_128, result.Gradient: 764_708_864, result.OptimizerState: 1_527_666_688, result.Workspace: 17_039_360, result.Unknown: 16_384}
	if got != want {
		t.Errorf("at the end %v, want %v", got, want)
	}
	var req result.Categories
	var blocks [result.NumCategories]int
	for _, b := range h.LiveBlocks(end) {
		req[b.Category] += b.Requested
		blocks[b.Category]++
	}
	if req[result.Parameter] != 761_840_640 || req[result.Gradient] != 761_840_640 || req[result.OptimizerState] != 1_523_681_280 {
		t.Errorf("requested parameter/gradient/optimizer_state %d/%d/%d, want 761,840,640 each and twice that",
			req[result.Parameter], req[result.Gradient], req[result.OptimizerState])
	}
	if blocks[result.Parameter] != 111 || blocks[result.Gradient] != 111 || blocks[result.OptimizerState] != 222 {
		t.Errorf("blocks %v: want 111 parameters, 111 gradients, 222 AdamW states", blocks)
	}
	// The gradients live across steps (no zero_grad), but the run peaks in
	// the optimizer step, which needs them: freeing them before the
	// forward would not lower the peak (the what-if finds 0 B), so
	// set_to_none is no suggestion; nor is weight quantization.
	r := Analyze(s, DefaultOptions())
	if ids := suggestionIDs(r); slices.Contains(ids, "set_to_none") || slices.Contains(ids, "quantize_weights") {
		t.Errorf("suggestions %v: want neither set_to_none nor weight quantization", ids)
	}
	if r.Devices[0].Peak.Phase != result.PhaseOptimizer {
		t.Errorf("peak in %s, want optimizer", r.Devices[0].Peak.Phase)
	}
}

// TestMemoryTimelinePreexistingCategories: every PREEXISTING row of
// PyTorch's memory timeline keeps its category. At the peak (the first of
// its highest rows, event 994) the file's own categories give parameter
// 102,440,608, optimizer_state 102,228,128, input 19,395,584 and unknown
// 134,218,152 bytes.
func TestMemoryTimelinePreexistingCategories(t *testing.T) {
	s := analysistest.OpenShared(t, "traces", "hta_memory_timeline_categories.raw.json.gz")
	r := Analyze(s, DefaultOptions())
	if len(r.Devices) != 1 {
		t.Fatalf("%d devices", len(r.Devices))
	}
	d := r.Devices[0]
	peak := result.Categories{result.Parameter: 102_440_608, result.OptimizerState: 102_228_128, result.InputData: 19_395_584, result.Unknown: 134_218_152,
		result.Activation: 2_592_465_920, result.AutogradDetail: 64_225_280, result.Gradient: 67_858_432}
	end := result.Categories{result.Parameter: 102_440_608, result.OptimizerState: 102_228_128, result.InputData: 19_395_584, result.Unknown: 424,
		result.Activation: 128_000, result.Gradient: 107_868_160}
	if d.Peak.AllocatedBytes != 3_082_832_104 || d.Peak.EventIndex != 994 || d.Peak.Categories != peak {
		t.Errorf("peak %d at %d: %v; want 3,082,832,104 at 994: %v", d.Peak.AllocatedBytes, d.Peak.EventIndex, d.Peak.Categories, peak)
	}
	if d.AtEnd.Categories != end {
		t.Errorf("at the end %v, want %v", d.AtEnd.Categories, end)
	}
	for _, u := range d.Rules {
		if u.Rule != history.RuleProfilerCategory {
			t.Errorf("rule %s decided %d B: every block has PyTorch's category", u.Rule, u.Bytes)
		}
	}
}

// TestQLoRAFrozenBaseWeights: cranberrii fine-tunes LoRA adapters on a
// bitsandbytes 4-bit model. The 532 untraced blocks that pair with no
// gradient (1,077,616,640 B, 47% of the end) are the frozen base weights:
// parameters, under a rule that says they are quantized; the 88 adapter
// weights pair with their gradients; two blocks are cuBLAS workspaces.
func TestQLoRAFrozenBaseWeights(t *testing.T) {
	s := analysistest.OpenShared(t, "snapshots", "genB_torch2.1_cranberrii.pickle")
	r := Analyze(s, DefaultOptions())
	d := r.Devices[0]
	rules := map[string]result.RuleUse{}
	for _, u := range d.Rules {
		rules[u.Rule] = u
	}
	if u := rules[history.RuleQuantizedWeights]; u.Blocks != 532 || u.Bytes != 1_077_616_640 || u.Category != result.Parameter {
		t.Errorf("quantized base weights %+v, want 532 parameter blocks of 1,077,616,640 B", u)
	}
	if u := rules[history.RulePreParamPaired]; u.Blocks != 88 || u.Bytes != 9_011_200 {
		t.Errorf("adapter weights %+v, want 88 blocks of 9,011,200 B", u)
	}
	if c := d.AtEnd.Categories; c[result.Parameter] != 1_077_616_640+9_011_200 || c[result.Workspace] != 17_039_360 {
		t.Errorf("at the end %v", c)
	}
	if ids := suggestionIDs(r); slices.Contains(ids, "qlora") || slices.Contains(ids, "quantize_weights") {
		t.Errorf("suggestions %v: the weights are quantized already", ids)
	}
	if !hasDiag(r, "frozen_base_weights") {
		t.Errorf("no frozen_base_weights diagnostic")
	}
}

// TestNoHistoryNoFrames: dumps without history whose blocks have no frames
// say unknown, not parameter, and suggest nothing about weights; a block of
// PyTorch's default cuBLAS workspace size (8,519,680 B) is a workspace.
func TestNoHistoryNoFrames(t *testing.T) {
	tests := []struct {
		file      string
		device    int
		workspace int64 // by size (without frames) and by frames
		unknown   int64 // no frames, no history
	}{
		{"edge_2dev_expandable_no_trace_albi2.pickle", 0, 8_519_680, 10_240},
		{"edge_2dev_expandable_no_trace_albi2.pickle", 1, 8_519_680, 0},
		// zijiandu: one workspace has frames (mm_mat1_backward under
		// getCurrentCUDABlasHandle), one has none.
		{"genB_torch2.1_zijiandu_state_only_diffusion.pickle", 0, 2 * 8_519_680, 8_531_327_488},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			s := analysistest.OpenShared(t, "snapshots", tc.file)
			r := Analyze(s, DefaultOptions())
			var d *result.DeviceResult
			for i := range r.Devices {
				if r.Devices[i].Device == tc.device {
					d = &r.Devices[i]
				}
			}
			if d == nil {
				t.Fatalf("no device %d", tc.device)
			}
			c := d.AtEnd.Categories
			if c[result.Workspace] != tc.workspace || c[result.Unknown] != tc.unknown || c[result.Parameter] > c.Total()/100 {
				t.Errorf("device %d at the end %v: want workspace %d, unknown %d, next to no parameters", tc.device, c, tc.workspace, tc.unknown)
			}
			for _, sg := range r.Suggestions {
				if sg.ID == "quantize_weights" || sg.ID == "qlora" || strings.Contains(sg.Because, "nothing is trained") {
					t.Errorf("suggestion %s: %s", sg.ID, sg.Because)
				}
			}
			if tc.unknown > 0 && !hasDiag(r, "no_frames_no_history") {
				t.Errorf("no no_frames_no_history diagnostic")
			}
		})
	}
}

// TestLfielikeKVCache: lfielike is generation with a quantized key/value
// cache (KIVI) in the project's copy of transformers' cache module
// (models/cache_utils_V2.py update_new, and the quantizers it calls),
// dumped with enabled="state". The cache is kv_cache at the peak and at the
// end, to the byte: 512 blocks, 2,911,981,568 B (2,894,524,416 requested),
// the blocks live at the dump with a frame in a cache_utils*.py file
// (testdata/facts/category_facts.py). Nothing in it is activation, and an
// inference run gets no suggestion that needs a backward or assumes weights.
func TestLfielikeKVCache(t *testing.T) {
	const blocks, bytes = 512, 2_911_981_568
	s := analysistest.OpenShared(t, "snapshots", "genD_torch2.4_lfielike_state_only.pickle")
	r := Analyze(s, DefaultOptions())
	d := &r.Devices[0]
	if got := d.Peak.Categories[result.KVCache]; got != bytes {
		t.Errorf("kv_cache at the peak %d, want %d", got, bytes)
	}
	if got := d.AtEnd.Categories[result.KVCache]; got != bytes {
		t.Errorf("kv_cache at the end %d, want %d", got, bytes)
	}
	if a := d.AtEnd.Categories[result.Activation]; a > bytes/100 {
		t.Errorf("activation at the end %d: the cache is counted as activations", a)
	}
	var n int
	for _, u := range d.Rules {
		if u.Category == result.KVCache {
			if u.Rule != history.RuleKVCacheCopy || u.Confidence != result.Medium {
				t.Errorf("kv_cache by %s (%s), want %s (medium)", u.Rule, u.Confidence, history.RuleKVCacheCopy)
			}
			n += u.Blocks
		}
	}
	if n != blocks {
		t.Errorf("kv_cache %d blocks, want %d", n, blocks)
	}
	for _, sg := range r.Suggestions {
		switch sg.ID {
		case "activation_checkpointing", "gradient_accumulation", "optimizer_8bit", "paged_optimizer", "cpu_offload", "quantize_weights", "qlora", "set_to_none":
			t.Errorf("suggestion %s for an inference run without weights in the file: %s", sg.ID, sg.Because)
		}
	}
}
