package analysis

import (
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/internal/analysistest"
)

// TestQuantizedKernelsInTraces: a trace recorded without Python stacks
// still names the quantized kernels an inference ran (bitsandbytes' and
// torchao's operators, the int4-packed and int8 × int8 matmuls, vLLM's Marlin kernel) or the
// quantized layers' module spans: weights already quantized get no
// "load the weights in 8-bit". The same run with a plain matmul gets it
// where the trace names the weights (module or user frames).
func TestQuantizedKernelsInTraces(t *testing.T) {
	for _, kind := range frameKinds {
		for _, c := range []struct {
			cat, op   string
			quantized bool
		}{
			{"cpu_op", "aten::mm", false},
			{"cpu_op", "bitsandbytes::gemv_4bit", true},
			{"cpu_op", "torchao::int4_matmul", true},
			{"cpu_op", "aten::_weight_int4pack_mm", true},
			{"cpu_op", "aten::_int_mm", true},
			{"cpu_op", "aten::_scaled_mm", false},
			{"cpu_op", "_C::gptq_marlin_gemm", true},
			{"python_function", "nn.Module: Linear4bit_3", true},
			{"python_function", "nn.Module: Linear_3", false},
		} {
			t.Run(fmt.Sprintf("%s, %s", kind, c.op), func(t *testing.T) {
				f := newTraceFix(kind, 0)
				const layers, w = 8, 64 << 20
				f.in("python_function", "serve.py(3): <module>", func() {
					f.in("python_function", "transformers/modeling_utils.py(4000): from_pretrained", func() {
						for range layers {
							f.in("python_function", "torch/nn/modules/linear.py(100): __init__", func() {
								f.in("cpu_op", "aten::empty", func() { f.alloc(w) })
							})
						}
					})
					f.in("python_function", "transformers/generation/utils.py(2700): _sample", func() {
						for range 4 {
							f.in("python_function", "nn.Module: LlamaForCausalLM_0", func() {
								for range layers {
									f.in(c.cat, c.op, func() {
										f.in("cpu_op", "aten::empty", func() { f.free(f.alloc(1<<20), 1<<20) })
									})
								}
							})
						}
					})
				})
				r := Analyze(analysistest.ReadJSON(t, f.json()), DefaultOptions())
				namesWeights := kind == "module frames" || kind == "user frames"
				namesKernel := kind == "module frames" || c.cat == "cpu_op" && kind != "no frames"
				want := namesWeights && !(c.quantized && namesKernel)
				if got := suggestionIn(r, "quantize_weights") != nil; got != want {
					t.Errorf("quantize_weights suggested %v, want %v (%v)", got, want, suggestionIDs(r))
				}
				checkSavingsAreWhatIfs(t, r)
			})
		}
	}
}
