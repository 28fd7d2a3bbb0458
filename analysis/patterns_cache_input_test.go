package analysis

import (
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// TestKVCacheNamesAround: a serving engine's _initialize_kv_caches profiles
// the model and captures its CUDA graphs before it allocates the cache:
// only the cache's own allocations are kv_cache — not the profiling
// forward's tensors, nor what the graph capture keeps. Only library frames
// name the cache.
func TestKVCacheNamesAround(t *testing.T) {
	for _, kind := range frameKinds {
		for _, layers := range []int{2, 16} {
			t.Run(fmt.Sprintf("%s, %d layers", kind, layers), func(t *testing.T) {
				x := fx{st.NewSim(), kind}
				s := x.s
				around := []*st.Dict{s.F("vllm/v1/engine/core.py", 180, "_initialize_kv_caches"), s.F("vllm/v1/engine/core.py", 90, "__init__")}
				user := []*st.Dict{s.F("serve.py", 5, "main")}
				fwd := x.stack(cppAddmm, append([]*st.Dict{s.F("vllm/model_executor/models/llama.py", 300, "forward"), s.F("torch/nn/modules/module.py", 1787, "_call_impl"),
					s.F("vllm/v1/worker/gpu_model_runner.py", 2500, "profile_run")}, around...), user)
				for range 4 {
					s.Free(0, s.Alloc(0, 64<<20, fwd)) // the profiling forward
				}
				capture := x.stack(cppAddmm, append([]*st.Dict{s.F("vllm/model_executor/models/llama.py", 300, "forward"), s.F("torch/nn/modules/module.py", 1787, "_call_impl"),
					s.F("torch/cuda/graphs.py", 250, "__enter__"), s.F("vllm/v1/worker/gpu_model_runner.py", 2800, "capture_model")}, around...), user)
				for range 3 {
					s.Alloc(0, 8<<20, capture) // kept by the captured graphs
				}
				alloc := x.stack([]string{"at::native::zeros(c10::ArrayRef<long>)"}, append([]*st.Dict{s.F("vllm/v1/worker/gpu_model_runner.py", 2990, "_allocate_kv_cache_tensors"),
					s.F("vllm/v1/worker/gpu_model_runner.py", 3160, "initialize_kv_cache")}, around...), user)
				var cache int64
				for range layers {
					s.Alloc(0, 32<<20, alloc)
					cache += 32 << 20
				}
				snap := analysistest.Read(t, s, 0)
				h := history.Build(snap, snap.Device(0))
				got := requestedAtEndOf(h)[result.KVCache]
				want := cache
				if kind != "module frames" {
					want = 0 // the library's frames are gone
				}
				if got != want {
					t.Errorf("kv_cache %d B, want the cache's %d", got, want)
				}
			})
		}
	}
}

// TestUseCacheInTraining: a training run whose model builds a KV cache
// (transformers with use_cache left on) is told so and to pass
// use_cache=False, saving the cache (the what-if's saving): the cache is
// kv_cache, not activations.
func TestUseCacheInTraining(t *testing.T) {
	for _, kind := range frameKinds {
		for _, layers := range []int{2, 8} {
			t.Run(fmt.Sprintf("%s, %d layers", kind, layers), func(t *testing.T) {
				x := fx{st.NewSim(), kind}
				s := x.s
				user := []*st.Dict{s.F("finetune.py", 30, "<module>")}
				attn := []*st.Dict{s.F("transformers/models/llama/modeling_llama.py", 250, "forward"), s.F("torch/nn/modules/module.py", 1787, "_call_impl")}
				kv := x.stack([]string{"at::native::cat(c10::ArrayRef<at::Tensor>)"}, append([]*st.Dict{s.F("transformers/cache_utils.py", 120, "update")}, attn...), user)
				act := x.stack(cppAddmm, attn, user)
				bwd := x.stack(cppMmBwd, nil, nil)
				var cacheBytes int64
				for step := 0; step < 3; step++ {
					var saved, cache []uint64
					s.Annotate(0, "## forward ##", func() {
						for range layers {
							saved = append(saved, s.Alloc(0, 16<<20, act))
							cache = append(cache, s.Alloc(0, 4<<20, kv), s.Alloc(0, 4<<20, kv))
						}
					})
					cacheBytes = int64(2*layers) * 4 << 20
					s.Annotate(0, "backward", func() {
						for _, a := range saved {
							s.Free(0, s.Alloc(0, 16<<20, bwd))
							s.Free(0, a)
						}
						for _, c := range cache {
							s.Free(0, c)
						}
					})
				}
				snap := analysistest.Read(t, s, 0)
				r := Analyze(snap, DefaultOptions())
				var sg *result.Suggestion
				for i := range r.Suggestions {
					if r.Suggestions[i].ID == "use_cache_off" {
						sg = &r.Suggestions[i]
					}
				}
				if kind != "module frames" { // only transformers' frames name the cache
					if sg != nil {
						t.Errorf("use_cache_off without the cache's frames: %s", sg.Because)
					}
					return
				}
				if got := r.Devices[0].Peak.Categories[result.KVCache]; got != cacheBytes {
					t.Errorf("kv_cache at the peak %d, want %d", got, cacheBytes)
				}
				if sg == nil || sg.EstimatedSavingsBytes != cacheBytes {
					t.Fatalf("use_cache_off %+v, want a saving of %d", sg, cacheBytes)
				}
				for _, p := range r.WhatIf.Suggestions {
					if p.ID == sg.ID && p.SavingBytes != sg.EstimatedSavingsBytes {
						t.Errorf("what-if %d, suggestion %d", p.SavingBytes, sg.EstimatedSavingsBytes)
					}
				}
			})
		}
	}
}

// TestDeviceCastsAreNotInput: a dtype cast on the device — aten::_to_copy
// inside the op that uses its result (autocast's casts of an activation),
// no copy from the host — is not input, whatever phase the stacks let the
// analysis see; and the identical casts of every step get one category.
// A copy to the device from the user's code (Tensor.to with a device) is
// input; Tensor.to with a dtype alone (C++ frames: dispatch_to's
// ScalarType overload) is not.
func TestDeviceCastsAreNotInput(t *testing.T) {
	for _, kind := range frameKinds {
		for _, steps := range []int{2, 6} {
			t.Run(fmt.Sprintf("%s, %d steps", kind, steps), func(t *testing.T) {
				x := fx{st.NewSim(), kind}
				s := x.s
				user := []*st.Dict{s.F("infer.py", 40, "<module>")}
				cast := x.stack([]string{"at::native::empty_cuda(c10::ArrayRef<long>)", "at::native::_to_copy(at::Tensor const&, std::optional<c10::ScalarType>)",
					"at::_ops::_to_copy::call(at::Tensor const&)", "at::native::linear(at::Tensor const&, at::Tensor const&)", "at::_ops::linear::call(at::Tensor const&, at::Tensor const&)"},
					[]*st.Dict{s.F("torch/nn/modules/linear.py", 125, "forward")}, []*st.Dict{s.F("model.py", 30, "forward"), user[0]})
				out := x.stack(cppAddmm, []*st.Dict{s.F("torch/nn/modules/linear.py", 125, "forward")}, []*st.Dict{s.F("model.py", 30, "forward"), user[0]})
				toDev := x.stack([]string{"at::native::_to_copy(at::Tensor const&, std::optional<c10::Device>)", "at::_ops::to::call(at::Tensor const&)",
					"torch::autograd::dispatch_to(at::Tensor const&, c10::Device, bool, bool, std::optional<c10::MemoryFormat>)", "torch::autograd::THPVariable_to(_object*, _object*, _object*)"},
					nil, []*st.Dict{s.F("infer.py", 38, "<module>")})
				// batch.half(): a cast of what is on the device already
				half := x.stack([]string{"at::native::_to_copy(at::Tensor const&, std::optional<c10::ScalarType>)", "at::_ops::_to_copy::call(at::Tensor const&)",
					"torch::autograd::dispatch_to(at::Tensor const&, c10::ScalarType, bool, bool, std::optional<c10::MemoryFormat>)", "torch::autograd::THPVariable_to(_object*, _object*, _object*)"},
					nil, []*st.Dict{s.F("infer.py", 39, "<module>")})
				var prev uint64
				for range steps {
					batch := s.Alloc(0, 1<<20, toDev) // batch.to("cuda")
					hb := s.Alloc(0, 1<<19, half)     // batch.half()
					c := s.Alloc(0, 2<<20, cast)      // the batch cast to bf16 for the matmul
					s.Free(0, hb)
					o := s.Alloc(0, 4<<20, out)
					s.Free(0, c)
					s.Free(0, batch)
					if prev != 0 {
						s.Free(0, prev)
					}
					prev = o
				}
				snap := analysistest.Read(t, s, 0)
				h := history.Build(snap, snap.Device(0))
				cats := map[result.Category]int{}
				for bi := range h.Blocks {
					b := &h.Blocks[bi]
					switch b.Requested {
					case 2 << 20:
						cats[b.Category]++
						if b.Category == result.InputData {
							t.Errorf("a cast on the device counted as input (%s)", b.Rule())
						}
					case 1 << 20:
						if kind == "C++ frames" && b.Category != result.InputData {
							t.Errorf("batch.to(device) is %s (%s), want input", b.Category, b.Rule())
						}
					case 1 << 19:
						if kind == "C++ frames" && b.Category == result.InputData {
							t.Errorf("batch.half() on the device is input (%s)", b.Rule())
						}
					}
				}
				if len(cats) != 1 {
					t.Errorf("identical casts got %d categories: %v", len(cats), cats)
				}
			})
		}
	}
}
