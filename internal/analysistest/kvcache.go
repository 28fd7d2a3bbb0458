package analysistest

import (
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// Stack kinds the KV-cache fixtures vary: how a recording shows the frames
// between the cache code and the program.
const (
	KVModule = "module frames" // torch.nn's module.py _call_impl between the forwards
	KVUser   = "user frames"   // the program's own files only (no module.py)
	KVCpp    = "C++ frames"    // stacks="all": the allocator and ATen frames innermost
)

// KVStack builds an allocation stack of kind: inner (innermost first) is
// the cache code, forwards the model's forward frames from the attention
// out, outer what calls the model.
func KVStack(s *st.Sim, kind string, inner, forwards, outer []*st.Dict) *st.List {
	var fs []*st.Dict
	if kind == KVCpp {
		fs = append(fs,
			s.F("", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)"),
			s.F("", 0, "at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>)"),
			s.F("", 0, "at::_ops::cat::call(c10::ArrayRef<at::Tensor> const&, long)"),
			s.F("", 0, "torch::autograd::THPVariable_cat(_object*, _object*, _object*)"))
	}
	fs = append(fs, inner...)
	for _, f := range forwards {
		fs = append(fs, f)
		if kind != KVUser {
			fs = append(fs, s.F("torch/nn/modules/module.py", 1562, "_call_impl"), s.F("torch/nn/modules/module.py", 1553, "_wrapped_call_impl"))
		}
	}
	return s.Stack(append(fs, outer...)...)
}

// KVCase is one program that keeps a KV cache: Run simulates it and
// returns the addresses of the cache blocks live at the end.
type KVCase struct {
	Name      string
	Copy      bool // a copy of transformers' cache module in the project, not the library's
	StateOnly bool
	Run       func(s *st.Sim, kind string, layers int) []uint64
}

// generateLoop simulates transformers' generate: per new token, each layer's
// attention makes a transient score tensor and updates its key and value
// caches through update (the cache code, grown: the new tensor replaces the
// old). It returns the live cache tensors.
func generateLoop(s *st.Sim, kind string, layers, tokens int, update []*st.Dict, model string) []uint64 {
	gen := []*st.Dict{s.F("transformers/generation/utils.py", 3206, "_sample"), s.F("transformers/generation/utils.py", 2215, "generate"), s.F("run.py", 100, "main")}
	fwd := []*st.Dict{s.F(model, 482, "forward"), s.F(model, 699, "forward"), s.F(model, 968, "forward"), s.F(model, 1214, "forward")}
	up := KVStack(s, kind, update, fwd, gen)
	scores := KVStack(s, kind, []*st.Dict{s.F("torch/nn/functional.py", 2140, "softmax")}, fwd, gen)
	logits := KVStack(s, kind, []*st.Dict{s.F("torch/nn/modules/linear.py", 125, "forward")}, fwd[3:], gen)
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

// KVCases are the families of programs that keep a KV cache: Hugging Face's
// cache classes (transformers/cache_utils.py, and the module copied into a
// project under another name), vLLM's cache engine and model runner, and
// SGLang's KV pool.
var KVCases = []KVCase{
	{"transformers DynamicCache (DynamicLayer.update)", false, false, func(s *st.Sim, kind string, layers int) []uint64 {
		return generateLoop(s, kind, layers, 5, []*st.Dict{s.F("transformers/cache_utils.py", 119, "update"), s.F("transformers/cache_utils.py", 776, "update")},
			"transformers/models/llama/modeling_llama.py")
	}},
	{"transformers StaticCache, lazy_initialization inside update", false, false, func(s *st.Sim, kind string, layers int) []uint64 {
		inner := []*st.Dict{s.F("transformers/cache_utils.py", 270, "lazy_initialization"), s.F("transformers/cache_utils.py", 298, "update"), s.F("transformers/cache_utils.py", 776, "update")}
		fwd := []*st.Dict{s.F("transformers/models/mistral/modeling_mistral.py", 160, "forward"), s.F("transformers/models/mistral/modeling_mistral.py", 390, "forward")}
		gen := []*st.Dict{s.F("transformers/generation/utils.py", 2700, "_sample"), s.F("serve.py", 8, "main")}
		st0 := KVStack(s, kind, inner, fwd, gen)
		var cache []uint64
		for range 2 * layers {
			cache = append(cache, s.Alloc(0, 4*8*4096*128*2, st0))
		}
		tmp := KVStack(s, kind, []*st.Dict{s.F("torch/nn/functional.py", 2140, "softmax")}, fwd, gen)
		for range 3 {
			s.Free(0, s.Alloc(0, 3*MiB, tmp))
		}
		return cache
	}},
	{"transformers StaticCache preallocated in __init__ (generate's _get_cache)", false, false, func(s *st.Sim, kind string, layers int) []uint64 {
		init := KVStack(s, kind, []*st.Dict{s.F("transformers/cache_utils.py", 1180, "__init__"), s.F("transformers/generation/utils.py", 1790, "_get_cache"),
			s.F("transformers/generation/utils.py", 2050, "generate")}, nil, []*st.Dict{s.F("bench.py", 30, "main")})
		var cache []uint64
		for range 2 * layers {
			cache = append(cache, s.Alloc(0, 2*16*2048*128*2, init))
		}
		return cache
	}},
	{"a copy of transformers' cache module (cache_utils_V2.py update_new, quantized)", true, false, func(s *st.Sim, kind string, layers int) []uint64 {
		return generateLoop(s, kind, layers, 4, []*st.Dict{s.F("/root/proj/quant/myquant.py", 130, "my_value_quant"), s.F("/root/proj/models/cache_utils_V2.py", 266, "update_new")},
			"/root/proj/models/modeling_llama_V2.py")
	}},
	{"the same copy, dumped with enabled=\"state\"", true, true, func(s *st.Sim, kind string, layers int) []uint64 {
		return generateLoop(s, kind, layers, 3, []*st.Dict{s.F("/root/proj/models/cache_utils.py", 224, "update")}, "/root/proj/models/modeling_llama.py")
	}},
	{"vLLM v1 gpu_model_runner _allocate_kv_cache_tensors", false, false, func(s *st.Sim, kind string, layers int) []uint64 {
		st0 := KVStack(s, kind, []*st.Dict{s.F("vllm/v1/worker/gpu_model_runner.py", 2990, "_allocate_kv_cache_tensors"),
			s.F("vllm/v1/worker/gpu_model_runner.py", 3120, "initialize_kv_cache_tensors"), s.F("vllm/v1/worker/gpu_model_runner.py", 3160, "initialize_kv_cache"),
			s.F("vllm/v1/worker/gpu_worker.py", 260, "initialize_from_config")}, nil, []*st.Dict{s.F("serve.py", 5, "main")})
		fwd := KVStack(s, kind, nil, []*st.Dict{s.F("vllm/model_executor/models/llama.py", 300, "forward")}, []*st.Dict{s.F("serve.py", 9, "main")})
		var cache []uint64
		for range layers {
			cache = append(cache, s.Alloc(0, 2*4096*16*8*128*2, st0))
		}
		for range 4 {
			s.Free(0, s.Alloc(0, 8*MiB, fwd))
		}
		return cache
	}},
	{"SGLang MHATokenToKVPool _create_buffers", false, false, func(s *st.Sim, kind string, layers int) []uint64 {
		st0 := KVStack(s, kind, []*st.Dict{s.F("sglang/srt/mem_cache/memory_pool.py", 380, "_create_buffers"), s.F("sglang/srt/mem_cache/memory_pool.py", 350, "__init__"),
			s.F("sglang/srt/model_executor/model_runner.py", 900, "init_memory_pool")}, nil, []*st.Dict{s.F("launch_server.py", 14, "main")})
		var cache []uint64
		for range 2 * layers { // k_buffer and v_buffer, one per layer each
			cache = append(cache, s.Alloc(0, (65536+1)*8*128*2, st0))
		}
		return cache
	}},
}

// SimBlocks is the allocator bytes the simulator's dump of d gives the
// blocks at addrs.
func SimBlocks(t testing.TB, d *snapshot.Device, addrs []uint64) int64 {
	t.Helper()
	var n int64
	for _, a := range addrs {
		found := false
		for _, g := range d.Segments {
			for _, b := range g.Blocks {
				if b.Address == a {
					n += b.Size
					found = true
				}
			}
		}
		if !found {
			t.Fatalf("block %#x is not in the dump", a)
		}
	}
	return n
}
