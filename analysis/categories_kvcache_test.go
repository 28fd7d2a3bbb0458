package analysis

import (
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// Stack kinds the KV-cache fixtures vary: how a recording shows the frames
// between the cache code and the program.
const (
	kvModule = "module frames" // torch.nn's module.py _call_impl between the forwards
	kvUser   = "user frames"   // the program's own files only (no module.py)
	kvCpp    = "C++ frames"    // stacks="all": the allocator and ATen frames innermost
)

// kvStack builds an allocation stack of kind: inner (innermost first) is
// the cache code, forwards the model's forward frames from the attention
// out, outer what calls the model.
func kvStack(s *st.Sim, kind string, inner, forwards, outer []*st.Dict) *st.List {
	var fs []*st.Dict
	if kind == kvCpp {
		fs = append(fs,
			s.F("", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)"),
			s.F("", 0, "at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>)"),
			s.F("", 0, "at::_ops::cat::call(c10::ArrayRef<at::Tensor> const&, long)"),
			s.F("", 0, "torch::autograd::THPVariable_cat(_object*, _object*, _object*)"))
	}
	fs = append(fs, inner...)
	for _, f := range forwards {
		fs = append(fs, f)
		if kind != kvUser {
			fs = append(fs, s.F("torch/nn/modules/module.py", 1562, "_call_impl"), s.F("torch/nn/modules/module.py", 1553, "_wrapped_call_impl"))
		}
	}
	return s.Stack(append(fs, outer...)...)
}

// kvCase is one program that keeps a KV cache: run simulates it and
// returns the addresses of the cache blocks live at the end.
type kvCase struct {
	name      string
	rule      string
	conf      result.Confidence
	stateOnly bool
	run       func(s *st.Sim, kind string, layers int) []uint64
}

// generateLoop simulates transformers' generate: per new token, each layer's
// attention makes a transient score tensor and updates its key and value
// caches through update (the cache code, grown: the new tensor replaces the
// old). It returns the live cache tensors.
func generateLoop(s *st.Sim, kind string, layers, tokens int, update []*st.Dict, model string) []uint64 {
	gen := []*st.Dict{s.F("transformers/generation/utils.py", 3206, "_sample"), s.F("transformers/generation/utils.py", 2215, "generate"), s.F("run.py", 100, "main")}
	fwd := []*st.Dict{s.F(model, 482, "forward"), s.F(model, 699, "forward"), s.F(model, 968, "forward"), s.F(model, 1214, "forward")}
	up := kvStack(s, kind, update, fwd, gen)
	scores := kvStack(s, kind, []*st.Dict{s.F("torch/nn/functional.py", 2140, "softmax")}, fwd, gen)
	logits := kvStack(s, kind, []*st.Dict{s.F("torch/nn/modules/linear.py", 125, "forward")}, fwd[3:], gen)
	cache := make([]uint64, 2*layers)
	var out uint64
	for tok := 1; tok <= tokens; tok++ {
		for l := range cache {
			n := s.Alloc(0, int64(tok)*8*128*2*64, up)
			if cache[l] != 0 {
				s.Free(0, cache[l])
			}
			cache[l] = n
			a := s.Alloc(0, int64(tok)*4096, scores)
			s.Free(0, a)
		}
		o := s.Alloc(0, 32000*2, logits)
		if out != 0 {
			s.Free(0, out)
		}
		out = o
	}
	return cache
}

// kvCases are the families of programs that keep a KV cache: Hugging Face's
// cache classes (transformers/cache_utils.py, and the module copied into a
// project under another name), vLLM's cache engine and model runner, and
// SGLang's KV pool.
var kvCases = []kvCase{
	{"transformers DynamicCache (DynamicLayer.update)", history.RuleKVCache, result.High, false, func(s *st.Sim, kind string, layers int) []uint64 {
		return generateLoop(s, kind, layers, 5, []*st.Dict{s.F("transformers/cache_utils.py", 119, "update"), s.F("transformers/cache_utils.py", 776, "update")},
			"transformers/models/llama/modeling_llama.py")
	}},
	{"transformers StaticCache, lazy_initialization inside update", history.RuleKVCache, result.High, false, func(s *st.Sim, kind string, layers int) []uint64 {
		inner := []*st.Dict{s.F("transformers/cache_utils.py", 270, "lazy_initialization"), s.F("transformers/cache_utils.py", 298, "update"), s.F("transformers/cache_utils.py", 776, "update")}
		fwd := []*st.Dict{s.F("transformers/models/mistral/modeling_mistral.py", 160, "forward"), s.F("transformers/models/mistral/modeling_mistral.py", 390, "forward")}
		gen := []*st.Dict{s.F("transformers/generation/utils.py", 2700, "_sample"), s.F("serve.py", 8, "main")}
		st0 := kvStack(s, kind, inner, fwd, gen)
		var cache []uint64
		for range 2 * layers {
			cache = append(cache, s.Alloc(0, 4*8*4096*128*2, st0))
		}
		tmp := kvStack(s, kind, []*st.Dict{s.F("torch/nn/functional.py", 2140, "softmax")}, fwd, gen)
		for range 3 {
			s.Free(0, s.Alloc(0, 3*mib, tmp))
		}
		return cache
	}},
	{"transformers StaticCache preallocated in __init__ (generate's _get_cache)", history.RuleKVCache, result.High, false, func(s *st.Sim, kind string, layers int) []uint64 {
		init := kvStack(s, kind, []*st.Dict{s.F("transformers/cache_utils.py", 1180, "__init__"), s.F("transformers/generation/utils.py", 1790, "_get_cache"),
			s.F("transformers/generation/utils.py", 2050, "generate")}, nil, []*st.Dict{s.F("bench.py", 30, "main")})
		var cache []uint64
		for range 2 * layers {
			cache = append(cache, s.Alloc(0, 2*16*2048*128*2, init))
		}
		return cache
	}},
	{"a copy of transformers' cache module (cache_utils_V2.py update_new, quantized)", history.RuleKVCacheCopy, result.Medium, false, func(s *st.Sim, kind string, layers int) []uint64 {
		return generateLoop(s, kind, layers, 4, []*st.Dict{s.F("/root/proj/quant/myquant.py", 130, "my_value_quant"), s.F("/root/proj/models/cache_utils_V2.py", 266, "update_new")},
			"/root/proj/models/modeling_llama_V2.py")
	}},
	{"the same copy, dumped with enabled=\"state\"", history.RuleKVCacheCopy, result.Medium, true, func(s *st.Sim, kind string, layers int) []uint64 {
		return generateLoop(s, kind, layers, 3, []*st.Dict{s.F("/root/proj/models/cache_utils.py", 224, "update")}, "/root/proj/models/modeling_llama.py")
	}},
	{"vLLM v1 gpu_model_runner _allocate_kv_cache_tensors", history.RuleKVCache, result.High, false, func(s *st.Sim, kind string, layers int) []uint64 {
		st0 := kvStack(s, kind, []*st.Dict{s.F("vllm/v1/worker/gpu_model_runner.py", 2990, "_allocate_kv_cache_tensors"),
			s.F("vllm/v1/worker/gpu_model_runner.py", 3120, "initialize_kv_cache_tensors"), s.F("vllm/v1/worker/gpu_model_runner.py", 3160, "initialize_kv_cache"),
			s.F("vllm/v1/worker/gpu_worker.py", 260, "initialize_from_config")}, nil, []*st.Dict{s.F("serve.py", 5, "main")})
		fwd := kvStack(s, kind, nil, []*st.Dict{s.F("vllm/model_executor/models/llama.py", 300, "forward")}, []*st.Dict{s.F("serve.py", 9, "main")})
		var cache []uint64
		for range layers {
			cache = append(cache, s.Alloc(0, 2*4096*16*8*128*2, st0))
		}
		for range 4 {
			s.Free(0, s.Alloc(0, 8*mib, fwd))
		}
		return cache
	}},
	{"SGLang MHATokenToKVPool _create_buffers", history.RuleKVCache, result.High, false, func(s *st.Sim, kind string, layers int) []uint64 {
		st0 := kvStack(s, kind, []*st.Dict{s.F("sglang/srt/mem_cache/memory_pool.py", 380, "_create_buffers"), s.F("sglang/srt/mem_cache/memory_pool.py", 350, "__init__"),
			s.F("sglang/srt/model_executor/model_runner.py", 900, "init_memory_pool")}, nil, []*st.Dict{s.F("launch_server.py", 14, "main")})
		var cache []uint64
		for range 2 * layers { // k_buffer and v_buffer, one per layer each
			cache = append(cache, s.Alloc(0, (65536+1)*8*128*2, st0))
		}
		return cache
	}},
}

// TestKVCacheFamilies: every family's cache, in every layer count and stack
// kind, is kv_cache — all of it and nothing else — by the rule and with
// the confidence its evidence allows: High in the libraries' own files,
// Medium in a copy of transformers' module (the name says it, the path
// says the project may have changed it).
func TestKVCacheFamilies(t *testing.T) {
	for _, tc := range kvCases {
		for _, kind := range []string{kvModule, kvUser, kvCpp} {
			for _, layers := range []int{2, 32} {
				t.Run(fmt.Sprintf("%s, %s, %d layers", tc.name, kind, layers), func(t *testing.T) {
					s := st.NewSim()
					s.StateOnly = tc.stateOnly
					cache := tc.run(s, kind, layers)
					snap := analysistest.Read(t, s, 0)
					h := history.Build(snap, snap.Devices[0])
					bytes, _, n := liveBy(h, result.KVCache)
					if want := simBlocks(t, h, cache); n != len(cache) || bytes != want {
						t.Errorf("kv_cache %d blocks, %d B; want %d, %d", n, bytes, len(cache), want)
					}
					for _, b := range h.LiveBlocks(h.EndIndex()) {
						if b.Category == result.KVCache && (b.Rule() != tc.rule || b.Confidence() != tc.conf) {
							t.Errorf("kv_cache block by %s (%s), want %s (%s)", b.Rule(), b.Confidence(), tc.rule, tc.conf)
						}
					}
				})
			}
		}
	}
}

// TestAttentionActivationsNotKVCache: a training run's attention — key and
// value projections, a torch.cat of keys in the user's own attention (extra
// memory tokens), no cache class anywhere — keeps activations: what forward
// saves and backward frees is activation, and nothing is kv_cache.
func TestAttentionActivationsNotKVCache(t *testing.T) {
	for _, kind := range []string{kvModule, kvUser, kvCpp} {
		for _, layers := range []int{2, 12} {
			t.Run(fmt.Sprintf("%s, %d layers", kind, layers), func(t *testing.T) {
				r := newRig()
				s := r.s
				loop := []*st.Dict{s.F("train.py", 40, "<module>")}
				fwd := []*st.Dict{s.F("model.py", 61, "forward"), s.F("model.py", 120, "forward")}
				proj := kvStack(s, kind, []*st.Dict{s.F("torch/nn/modules/linear.py", 125, "forward")}, fwd, loop)
				cat := kvStack(s, kind, []*st.Dict{s.F("model.py", 64, "key_value")}, fwd, loop)
				var state, grads []uint64
				var acts int64
				for range 3 {
					if grads != nil {
						s.Annotate(0, "Optimizer.zero_grad#AdamW.zero_grad", func() {
							for _, g := range grads {
								s.Free(0, g)
							}
						})
						grads = nil
					}
					var saved []uint64
					for range layers {
						for _, st := range []*st.List{proj, proj, cat, cat} {
							saved = append(saved, s.Alloc(0, 2*mib, st))
							acts += 2 * mib
						}
					}
					loss := s.Alloc(0, 4, r.loss)
					s.Free(0, s.Alloc(0, 4, r.seed))
					for _, p := range paramSizes {
						grads = append(grads, s.Alloc(0, p, nil))
					}
					for _, a := range saved {
						s.Free(0, a)
					}
					s.Annotate(0, "Optimizer.step#AdamW.step", func() {
						if state == nil {
							for _, p := range paramSizes {
								state = append(state, s.Alloc(0, p, r.optInit), s.Alloc(0, p, r.optInit))
							}
						}
					})
					s.Free(0, loss)
				}
				snap := analysistest.Read(t, s, 0)
				h := history.Build(snap, snap.Devices[0])
				var act int64
				for i := range h.Blocks {
					b := &h.Blocks[i]
					if b.Category == result.KVCache {
						t.Errorf("block %#x (%d B) is kv_cache by %s", b.Addr, b.Size, b.Rule())
					}
					if b.Category == result.Activation && b.Requested == 2*mib && b.Rule() == history.RuleSavedForBackward {
						act += b.Requested
					}
				}
				if act != acts {
					t.Errorf("attention activations saved for backward: %d B, want %d", act, acts)
				}
			})
		}
	}
}
