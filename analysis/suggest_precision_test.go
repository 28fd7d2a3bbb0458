package analysis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/analysistest"
)

// TestMixedPrecisionForTheGPU: a trace of fp32 training (AccumulateGrad of
// float gradients) on a GPU the trace names gets the mixed precision that
// GPU has: fp16 autocast with a gradient scaler before Ampere (V100, T4,
// Turing GeForce and Quadro: no bf16), bf16 autocast on Ampere and later,
// on AMD and where the name is unknown — with one saving, the what-if's.
// Without op spans nothing records the gradients' dtype: neither.
func TestMixedPrecisionForTheGPU(t *testing.T) {
	for _, kind := range frameKinds {
		for _, gpu := range []struct {
			name  string
			major int // the trace's computeMajor, 0 when it has none
			fp16  bool
		}{
			{"Tesla V100-SXM2-32GB", 0, true}, {"Tesla T4", 0, true}, {"NVIDIA GeForce RTX 2080 Ti", 0, true}, {"Quadro RTX 8000", 0, true},
			{"NVIDIA A100-SXM4-80GB", 0, false}, {"NVIDIA H100 80GB HBM3", 0, false}, {"NVIDIA GeForce RTX 4090", 0, false},
			{"NVIDIA RTX A6000", 0, false}, {"AMD Instinct MI250X", 0, false}, {"", 0, false},
			// The compute capability decides where the trace states it,
			// whatever the name says or does not.
			{"GRID V100D-32Q", 7, true}, {"Tesla P100-PCIE-16GB", 6, true}, {"NVIDIA CMP 30HX", 7, true},
			{"NVIDIA A10G", 8, false}, {"NVIDIA L4", 8, false}, {"AMD Radeon Graphics", 9, false},
		} {
			t.Run(fmt.Sprintf("%s, %q", kind, gpu.name), func(t *testing.T) {
				f := newTraceFix(kind, 0)
				const act = 256 << 20
				var kept []uint64
				f.in("python_function", "train.py(30): <module>", func() {
					f.in("user_annotation", "## forward ##", func() {
						f.in("python_function", "nn.Module: Net_0", func() {
							for range 4 {
								f.in("cpu_op", "aten::linear", func() { kept = append(kept, f.alloc(act)) })
							}
						})
					})
					f.in("user_annotation", "## backward ##", func() {
						for _, a := range kept {
							f.inArgs("cpu_op", "torch::autograd::AccumulateGrad", `{"Input Dims": [[4096, 4096]], "Input type": ["float"]}`, func() {})
							f.free(a, act)
						}
					})
				})
				js := string(f.json())
				if gpu.name != "" {
					major := ""
					if gpu.major > 0 {
						major = fmt.Sprintf(`, "computeMajor": %d, "computeMinor": 0`, gpu.major)
					}
					js = strings.Replace(js, `{"schemaVersion": 1,`, fmt.Sprintf(`{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": %q, "totalGlobalMem": 34084028416%s}],`, gpu.name, major), 1)
				}
				r := Analyze(analysistest.ReadJSON(t, []byte(js)), DefaultOptions())
				fp16, bf16 := suggestionIn(r, "mixed_precision_fp16") != nil, suggestionIn(r, "mixed_precision_bf16") != nil
				wantFP16, wantBF16 := gpu.fp16, !gpu.fp16
				if kind == "no frames" {
					wantFP16, wantBF16 = false, false
				}
				if fp16 != wantFP16 || bf16 != wantBF16 {
					t.Errorf("fp16 %v, bf16 %v; want %v, %v (%v)", fp16, bf16, wantFP16, wantBF16, suggestionIDs(r))
				}
				if s := suggestionIn(r, "mixed_precision_fp16"); s != nil && !strings.Contains(s.How, "GradScaler") {
					t.Errorf("fp16 without a gradient scaler: %s", s.How)
				}
				// Autocast halves the step's activations, not the fp32
				// weights, gradients or state: the reason says so.
				for _, id := range []string{"mixed_precision_fp16", "mixed_precision_bf16"} {
					if s := suggestionIn(r, id); s != nil && (!strings.Contains(s.Because, "activations and temporaries are 1.00 GiB") || strings.Contains(s.Because, "parameters, gradients and activations")) {
						t.Errorf("%s: %q", id, s.Because)
					}
				}
				checkSavingsAreWhatIfs(t, r)
			})
		}
	}
}

// TestMixedPrecisionV100Trace: Kineto's ResNet-50 trace, fp32 on a Tesla
// V100-DGXS-32GB (its deviceProperties), is told fp16 with a gradient
// scaler, not bf16 — a V100 (compute capability 7) has no bf16.
func TestMixedPrecisionV100Trace(t *testing.T) {
	r := Analyze(analysistest.OpenShared(t, "traces", "kineto_resnet50_legacy_v100.json.gz"), DefaultOptions())
	if suggestionIn(r, "mixed_precision_fp16") == nil || suggestionIn(r, "mixed_precision_bf16") != nil {
		t.Errorf("suggestions %v: want mixed_precision_fp16 and no bf16 on a V100", suggestionIDs(r))
	}
	// The trace's deviceProperties state computeMajor 7: the reason names it.
	if s := suggestionIn(r, "mixed_precision_fp16"); s != nil && !strings.Contains(s.Because, "the Tesla V100-DGXS-32GB (compute capability 7) has no bf16") {
		t.Errorf("reason %q: want the device and its compute capability", s.Because)
	}
	checkSavingsAreWhatIfs(t, r)
}
