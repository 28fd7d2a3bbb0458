package analysis

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/analysis/estimate"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// generateRun is one line of testdata/estimate/measured/generate.jsonl:
// greedy generate() of a transformers model built from its config, with
// the peak torch.cuda.max_memory_allocated of two calls (reset before
// each) and the bytes of the KV cache generate() returned. The line named
// "snapshot" describes the recorded run instead.
type generateRun struct {
	Name       string  `json:"name"`
	Dtype      string  `json:"dtype"`
	Attention  string  `json:"attention"`
	Cache      string  `json:"cache_implementation"`
	Batch      int64   `json:"batch"`
	Prompt     int64   `json:"prompt"`
	NewTokens  int64   `json:"new_tokens"`
	ParamBytes int64   `json:"parameters_bytes"`
	Peaks      []int64 `json:"generate_peak_bytes"`
	CacheBytes int64   `json:"cache_bytes"`
	File       string  `json:"file"`
	Peak       int64   `json:"peak"`
}

// readGenerate reads generate.jsonl.
func readGenerate(t *testing.T) (runs []generateRun, recorded generateRun) {
	t.Helper()
	path := filepath.Join(measuredHere, "generate.jsonl")
	for _, g := range readJSONL[generateRun](t, path) {
		if g.Name == "snapshot" {
			recorded = g
			continue
		}
		runs = append(runs, g)
	}
	if len(runs) == 0 || recorded.File == "" {
		t.Fatalf("%s: want generate runs and a recorded one", path)
	}
	return runs, recorded
}

// generateInputs is the estimate's description of a measured generate()
// run: its config.json, --optimizer none, --seq the prompt, --new-tokens.
func generateInputs(t *testing.T, g generateRun) estimate.Inputs {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(measuredHere, g.Name+".config.json"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := estimate.ParseHFConfig(data)
	if err != nil {
		t.Fatalf("%s: %v", g.Name, err)
	}
	gpu, _ := estimate.ParseGPU("H200")
	s := estimate.Setup{Precision: g.Dtype, Optimizer: "none", Batch: g.Batch, Seq: g.Prompt, NewTokens: g.NewTokens,
		Attention: g.Attention, StaticCache: g.Cache == "static"}
	return estimate.Inputs{Model: estimate.Model{Arch: a}, Setup: s, GPU: gpu}
}

// TestEstimateGenerateCalibrated: the estimate of each measured generate()
// run (Llama, Qwen2, Mistral, GPT-2 and a 7B shape; SDPA and eager
// attention; dynamic and static caches; bf16 and fp32) is within -5% and
// +10% of its peak, its KV cache is the bytes generate() returned, and
// its parameter bytes are exact.
func TestEstimateGenerateCalibrated(t *testing.T) {
	runs, _ := readGenerate(t)
	for _, g := range runs {
		t.Run(g.Name, func(t *testing.T) {
			r, err := estimate.Compute(generateInputs(t, g))
			if err != nil {
				t.Fatal(err)
			}
			if r.ParametersBytes != g.ParamBytes {
				t.Errorf("parameters %d B, measured %d B", r.ParametersBytes, g.ParamBytes)
			}
			if r.KVCacheBytes != g.CacheBytes {
				t.Errorf("KV cache %d B, generate() returned %d B", r.KVCacheBytes, g.CacheBytes)
			}
			var peak int64
			for _, p := range g.Peaks {
				peak = max(peak, p)
			}
			e := float64(r.TotalBytes-peak) / float64(peak)
			t.Logf("%s: measured %d, estimate %d (%+.1f%%) in %s", g.Name, peak, r.TotalBytes, 100*e, r.PeakPhase)
			if e > 0.10 || e < -0.05 {
				t.Errorf("estimate %d, measured %d: %+.1f%% (want within -5%% and +10%%)", r.TotalBytes, peak, 100*e)
			}
		})
	}
}

// TestGenerateSnapshotCategories: a recorded generate() run (a 4-layer
// Llama in bf16, batch 2, 128 prompt tokens, 24 new) peaks at what
// max_memory_allocated measured, and its KV cache at the end is the
// bytes of the cache generate() returned, in its own category.
func TestGenerateSnapshotCategories(t *testing.T) {
	_, rec := readGenerate(t)
	s, err := load.Open(filepath.Join(measuredHere, rec.File), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := Analyze(s, DefaultOptions()).Devices[0]
	if d.Peak.AllocatedBytes != rec.Peak {
		t.Errorf("peak %d, measured %d", d.Peak.AllocatedBytes, rec.Peak)
	}
	end := d.AtEnd.Categories
	if got := end[result.KVCache]; got != rec.CacheBytes {
		t.Errorf("kv_cache at the end %d, generate() returned a cache of %d B", got, rec.CacheBytes)
	}
	// The weights' blocks: their bytes and the allocator's unsplit tails.
	if got := end[result.Parameter]; got < rec.ParamBytes || got > rec.ParamBytes+rec.ParamBytes/100 {
		t.Errorf("parameter at the end %d, the model's weights %d B", got, rec.ParamBytes)
	}
	for _, c := range []result.Category{result.Gradient, result.OptimizerState, result.Activation, result.Temporary} {
		if end[c] > 1<<20 {
			t.Errorf("%s at the end %d B: generate() under no_grad keeps none", c, end[c])
		}
	}
}
