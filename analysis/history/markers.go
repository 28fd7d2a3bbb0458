package history

import (
	"path"
	"strings"

	"github.com/torchmem/torchmem/snapshot"
)

// Stack markers: what the frames of one stack say about the memory it
// allocated — the phase (hints), the kind (a module's weights, a KV cache,
// a cuBLAS workspace, autocast's casts, a framework's buffers, attention)
// and a copy to the device — computed once per stack (markersOf).

// hint is what a stack or annotation says about the phase of an event.
type hint uint8

const (
	hintNone      hint = iota // no frames at all, or only C++ frames without markers
	HintUser                  // Python frames, but no phase marker
	hintInit                  // model set-up: Module.to/_apply, parameter init, state loading (phase unknown)
	hintForward               // nn.Module __call__ / forward annotation
	hintBackward              // autograd engine, tensor.backward, autograd thread
	hintOptimizer             // torch/optim, Optimizer.step
	hintZeroGrad              // zero_grad
	hintData                  // DataLoader
)

// stackMarkers are facts about one stack, computed once per stack.
type stackMarkers struct {
	Hint           hint
	init           bool // model set-up frames (parameters moved or created)
	toDevice       bool // a copy to the device (Tensor.to, Lightning's batch transfer)
	cublas         bool // cuBLAS/cuBLASLt workspace allocation
	accumulateGrad bool // inside AccumulateGrad (gradient written to .grad)
	Attention      bool // scaled-dot-product attention / softmax of attention scores
	SdpaMath       bool // the math (materialising) SDPA backend
	fusedAttention bool // a fused attention kernel (flash, memory-efficient, cuDNN; flash-attn, xformers): no seq² tensors
	hasFrames      bool
	python         bool // the stack has Python frames
	// autocastCast: a cast made by autocast (at::autocast::cached_cast,
	// C++ frames), which caches the copies of weights.
	autocastCast bool
	// castInAttention: the innermost Python function on the way to the
	// op, before any forward or projection, is an attention function (a
	// hand-written scaled_dot_product_attention, eager_attention_forward):
	// what autocast casts there are queries, keys, values and scores —
	// activations, never a weight.
	castInAttention bool
	// applyLine is the line of the innermost torch/nn/modules/module.py
	// _apply frame (0: none): Module.to/cuda moves a parameter at one line
	// of _apply and its .grad at another.
	applyLine int64
	// bufferLine is the line of the innermost frame of Megatron's
	// param_and_grad_buffer.py (0: none): its buffers' __init__ allocates
	// the parameter buffer (with the distributed optimizer) and then, at a
	// later line, the gradient buffer. mainParams: a function named for
	// the optimizer's fp32 main parameters (Megatron's distributed
	// optimizer, _build_model_and_main_param_groups).
	bufferLine int64
	mainParams bool
	// recompute: a checkpointed forward recomputed in backward
	// (torch/utils/checkpoint.py unpack/recompute frames).
	recompute bool
	// autocastExit: autocast's region ends here (torch/amp/autocast_mode.py
	// __exit__, torch.clear_autocast_cache): frees of the weight cache.
	autocastExit bool
	// gradInForward: an autograd call (torch.autograd.grad, backward,
	// torch.autograd.functional's jvp/vjp, torch.func) made inside a model's
	// forward: the autograd engine work that follows belongs to forward.
	gradInForward bool
	// moduleInit: a weight made by a torch.nn module's constructor
	// (torch/nn/modules/*.py __init__, or a lazy module materialising):
	// a parameter wherever it was allocated.
	moduleInit bool
	// kvCache: a key/value cache of generation, in the libraries' own
	// code (isKVCacheCode). kvCacheCopy: in a copy of transformers' cache
	// module under another name (a file whose base name starts with
	// cache_utils, outside transformers).
	kvCache, kvCacheCopy bool
	// KvPool: the KV cache is a serving engine's preallocated pool (vLLM's
	// cache engine and model runners, SGLang's memory pools), sized by a
	// memory fraction rather than by the batch.
	KvPool bool
	// quantizedWeights: bitsandbytes' quantized layers at work (4-bit or
	// 8-bit matmuls, Linear4bit/Linear8bitLt): the run's base weights are
	// quantized. peft: a parameter-efficient fine-tuning wrapper (peft).
	quantizedWeights, peft bool
	// ddpBucket: DistributedDataParallel's Reducer allocating its flat
	// gradient buckets (c10d::Reducer::initialize_buckets; with Python
	// frames only, torch/nn/parallel/distributed.py's _ddp_init_helper or
	// _pre_forward as the innermost Python frame: the Reducer's
	// construction and its one rebuild of the buckets).
	ddpBucket bool
	// sharded: what the innermost frame of a sharding framework (FSDP,
	// DeepSpeed's ZeRO) says the allocation is (shardParam, shardGrad,
	// shardMaster; shardFramed: none of them; shardNone: no such frame).
	sharded uint8
}

// markersOf computes the markers of a stack, scanning from the innermost
// frame out. Forward and backward markers decide over optimizer, zero_grad
// and data markers, and among them the outermost wins: the autograd engine
// around a recomputed forward (activation checkpointing) is backward, a
// torch.autograd.grad call inside a module's forward is forward. An
// optimizer frame counts only when no closure lies between it and the
// allocation (optimizer.step(closure) runs forward and backward inside the
// step, as Lightning does); otherwise the innermost marker decides.
func markersOf(s *snapshot.Snapshot, st snapshot.StackID) stackMarkers {
	frames := s.StackOf(st)
	m := stackMarkers{hasFrames: len(frames) > 0}
	inner := hintNone // innermost optimizer/zero_grad/data/init marker
	fb := hintNone    // outermost forward/backward marker
	user := false
	closure := false
	autogradCall := false // an autograd call frame seen so far (inner side)
	setInner := func(h hint) {
		if inner == hintNone {
			inner = h
		}
	}
	castOp := 0           // a chrome trace's aten::to/_to_copy seen, before any Python frame (1), then inside a compute op (2)
	var op, module string // a chrome trace's innermost op (helpers skipped) and innermost nn.Module span
	sawOp := false        // a chrome trace's op span in the stack
	castOnly := false     // Tensor.to with a dtype and no device
	modelInside := false  // a model's call or a graph capture seen between a frame and the allocation
	castScoped := false   // the innermost forward, projection or attention function seen (castInAttention)
	shardSeen := false    // a sharding framework's frame seen: the innermost decides
	for _, id := range frames {
		f := &s.Frames[id]
		name, file := f.Name, strings.ReplaceAll(f.Filename, "\\", "/")
		if !shardSeen {
			m.sharded, shardSeen = shardingKind(f)
			if shardSeen && m.sharded == shardNone {
				m.sharded = shardFramed
			}
		}
		if f.Filename == "" {
			if strings.HasPrefix(name, "aten::") {
				sawOp = true
				if op == "" && !tensorHelperOp(name) {
					op = name
				}
			}
			if rest, ok := strings.CutPrefix(name, "nn.Module: "); ok && module == "" {
				module = rest
			}
		}
		if op, ok := opOfFrame(f); castOp < 2 && ok {
			switch {
			case op == "_to_copy" || op == "to" || strings.HasPrefix(op, "to_"):
				castOp = 1
			case castOp == 1 && !strings.HasPrefix(op, "empty") && op != "copy_" && op != "_ops":
				// a compute op casting its arguments: autocast's cast (an
				// attention kernel's are of q, k and v, no weight's)
				castOp, m.autocastCast = 2, !strings.Contains(op, "attention")
			}
		} else if IsPython(f) {
			castOp = 2 // called from Python: an explicit cast or copy
		}
		if strings.Contains(name, "scaled_dot_product_attention") || strings.Contains(name, "_scaled_dot_product") {
			m.Attention = true
			if strings.Contains(name, "_math") {
				m.SdpaMath = true
			}
		}
		if strings.Contains(name, "_flash_attention") || strings.Contains(name, "_efficient_attention") ||
			strings.Contains(name, "_cudnn_attention") || strings.HasPrefix(name, "flash_attn") ||
			strings.Contains(name, "memory_efficient_attention") {
			m.Attention, m.fusedAttention = true, true
		}
		if !IsPython(f) {
			switch {
			case strings.Contains(name, "getNewWorkspace") || strings.Contains(name, "getCurrentCUDABlasHandle") ||
				strings.Contains(name, "getCUDABlasLtWorkspace") || strings.Contains(name, "getCurrentCUDABlasLtHandle"):
				m.cublas = true
			case strings.Contains(name, "AccumulateGrad"):
				m.accumulateGrad = true
				fb = hintBackward
			case strings.Contains(name, "torch::autograd::Engine::") || strings.HasPrefix(name, "autograd::engine::evaluate_function") ||
				strings.Contains(name, "torch::autograd::python::PythonEngine"):
				fb = hintBackward
			case strings.Contains(name, "at::autocast::cached_cast"):
				m.autocastCast = true
			case strings.Contains(name, "at::autocast::clear_cache"):
				m.autocastExit = true
			case strings.Contains(name, "c10d::Reducer::initialize_buckets"):
				m.ddpBucket = true
			case strings.Contains(name, "dispatch_to("):
				// Tensor.to's overloads: a Device argument moves the
				// tensor; a ScalarType alone casts it where it is
				castOnly = castOnly || !strings.Contains(name, "c10::Device")
				m.toDevice = true
			case strings.Contains(name, "THPVariable_to(") || strings.Contains(name, "_to_copy"):
				m.toDevice = true
			case strings.HasPrefix(name, "Optimizer.step#"):
				if !closure {
					setInner(hintOptimizer)
				}
			case strings.HasPrefix(name, "Optimizer.zero_grad#"):
				setInner(hintZeroGrad)
			case strings.HasPrefix(name, "enumerate(DataLoader)#") || strings.HasPrefix(name, "enumerate(DataPipe)#"):
				setInner(hintData)
			case strings.HasPrefix(name, "nn.Module: ") || strings.Contains(name, "## forward ##") ||
				strings.HasSuffix(name, "DataParallel.forward"):
				fb = hintForward
			}
			continue
		}
		if !user && strings.HasSuffix(file, "torch/nn/parallel/distributed.py") && (name == "_ddp_init_helper" || name == "_pre_forward") {
			m.ddpBucket = true
		}
		user = true
		low := strings.ToLower(name)
		if !castScoped && IsPython(f) {
			switch {
			case name == "forward" || strings.Contains(low, "proj") || strings.Contains(low, "linear"):
				castScoped = true
			case namesAttention(low):
				m.castInAttention, castScoped = true, true
			}
		}
		markKinds(&m, file, name, low, modelInside)
		if m.applyLine == 0 && name == "_apply" && strings.HasSuffix(file, "torch/nn/modules/module.py") {
			m.applyLine = f.Line
		}
		if m.bufferLine == 0 && strings.HasSuffix(file, "/param_and_grad_buffer.py") {
			m.bufferLine = f.Line
		}
		m.mainParams = m.mainParams || strings.Contains(low, "main_param")
		if namesAttention(low) || strings.Contains(strings.ToLower(path.Base(file)), "attention") {
			m.Attention = true
		}
		if fusedAttentionCode(file, low) {
			// a fused kernel's integration (SDPA dispatches to flash or
			// memory-efficient attention): per-token outputs, no seq²
			// scores — unless C++ frames show SDPA's math backend
			m.fusedAttention = true
		}
		if strings.Contains(low, "closure") {
			closure = true
		}
		if name == "batch_to" || name == "transfer_batch_to_device" || name == "move_data_to_device" {
			m.toDevice = true
		}
		torchFile := IsTorch(file)
		modelInside = modelInside || IsModelFrame(f) || strings.HasSuffix(file, "torch/cuda/graphs.py")
		if isAutogradCall(file) {
			autogradCall = true
		}
		if strings.Contains(file, "/amp/autocast_mode.py") && name == "__exit__" {
			m.autocastExit = true
		}
		switch {
		case torchFile && (strings.HasSuffix(file, "torch/_tensor.py") && name == "backward" ||
			strings.HasSuffix(file, "torch/autograd/__init__.py") && (name == "backward" || name == "grad") ||
			strings.HasSuffix(file, "torch/autograd/graph.py") && name == "_engine_run_backward" ||
			strings.HasSuffix(file, "torch/utils/checkpoint.py") && (strings.Contains(name, "unpack") || strings.Contains(name, "recompute"))):
			fb = hintBackward
			m.recompute = m.recompute || strings.HasSuffix(file, "torch/utils/checkpoint.py")
		case strings.HasSuffix(file, "torch/nn/modules/module.py") && (name == "_call_impl" || name == "_wrapped_call_impl"),
			name == "forward" && !torchFile:
			// a module call, or a model's own forward (stacks that hold
			// only the user's files have no module.py frames)
			fb = hintForward
			if autogradCall {
				m.gradInForward = true
			}
		case torchFile && name == "zero_grad":
			setInner(hintZeroGrad)
		case strings.HasSuffix(file, "torch/nn/modules/module.py") && (name == "_apply" || name == "convert" || name == "to" || name == "cuda" ||
			name == "load_state_dict" || name == "_load_from_state_dict" || name == "register_parameter") ||
			strings.HasSuffix(file, "torch/nn/init.py") || name == "reset_parameters" || name == "from_pretrained":
			m.init = true
			setInner(hintInit)
		case strings.Contains(file, "torch/optim/") || name == "step" && strings.Contains(strings.ToLower(file), "optim"):
			if !closure {
				setInner(hintOptimizer)
			}
		case strings.Contains(file, "torch/utils/data/"):
			setInner(hintData)
		}
	}
	m.python = user
	if castOnly {
		m.toDevice = false // a dtype cast on the device, no copy from the host
	}
	if m.SdpaMath {
		m.fusedAttention = false
	}
	if sawOp && !m.fusedAttention {
		// A chrome trace names the op: in attention code (or under a
		// module named for attention), only the ops that make the score
		// matrix and its softmax, mask and dropout hold ∝ seq² tensors —
		// not the projections, casts or copies of q, k and v.
		low := strings.ToLower(module)
		m.Attention = scoreOps[op] && (m.Attention || namesAttention(low))
	}
	if m.autocastCast {
		m.toDevice = false // autocast's cast of a weight, not a copy to the device
	}
	switch {
	case fb != hintNone:
		m.Hint = fb
	case inner != hintNone:
		m.Hint = inner
	case user:
		m.Hint = HintUser
	}
	return m
}

// fusedAttentionCode reports whether a Python frame is a library's call
// into a fused attention kernel: transformers' sdpa/flash/flex attention
// integrations, flash-attn, xformers.
func fusedAttentionCode(file, low string) bool {
	base := path.Base(file)
	return base == "sdpa_attention.py" || base == "flash_attention.py" || base == "flex_attention.py" ||
		strings.Contains(file, "flash_attn/") || strings.Contains(file, "xformers/") || strings.HasPrefix(low, "sdpa_attention")
}

// opOfFrame names the ATen operator of a frame: a chrome trace's op span
// ("aten::linear" → linear) or a C++ frame of the op's implementation or
// dispatcher entry ("at::native::_to_copy(…)", "at::_ops::linear::call(…)").
func opOfFrame(f *snapshot.Frame) (string, bool) {
	name := f.Name
	if f.Filename == "" {
		if op, ok := strings.CutPrefix(name, "aten::"); ok {
			return op, true
		}
	}
	for _, p := range []string{"at::native::", "at::_ops::"} {
		if rest, ok := strings.CutPrefix(name, p); ok {
			if j := strings.IndexAny(rest, ":("); j >= 0 {
				rest = rest[:j]
			}
			if k := strings.LastIndexByte(rest, ' '); k >= 0 {
				rest = rest[k+1:]
			}
			return strings.TrimPrefix(rest, "structured_"), rest != ""
		}
	}
	return "", false
}

// scoreOps are the operators that make attention's score matrix, its
// scaling, mask, softmax and dropout (∝ batch·seq²) in eager attention.
var scoreOps = map[string]bool{"aten::bmm": true, "aten::baddbmm": true, "aten::matmul": true, "aten::softmax": true,
	"aten::_softmax": true, "aten::_masked_softmax": true, "aten::masked_fill": true, "aten::masked_fill_": true,
	"aten::dropout": true, "aten::native_dropout": true, "aten::div": true, "aten::mul": true, "aten::add": true,
	"aten::where": true, "aten::_safe_softmax": true}

// tensorHelperOp reports whether an op only allocates for the op around it
// (empty, clone, copy, contiguous): the op that allocated is further out.
func tensorHelperOp(name string) bool {
	switch name {
	case "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::clone", "aten::copy_", "aten::contiguous",
		"aten::zeros", "aten::zeros_like", "aten::ones", "aten::ones_like", "aten::resize_":
		return true
	}
	return false
}

// markKinds sets the markers that tell what kind of memory a Python frame
// makes, whatever the phase: a module's weights, a KV cache, quantized or
// adapter layers.
// modelInside says a model's call (or a CUDA graph's capture) lies between
// the frame and the allocation: a function named for the KV cache around
// it (vLLM's _initialize_kv_caches profiles the model and captures its
// graphs there) did not allocate a cache itself.
func markKinds(m *stackMarkers, file, name, low string, modelInside bool) {
	switch {
	case strings.Contains(file, "torch/nn/modules/") && (name == "__init__" || name == "initialize_parameters"):
		m.moduleInit = true
	case isKVCacheCode(file, low) && (!modelInside || isKVCacheFile(file)):
		m.kvCache = true
		m.KvPool = m.KvPool || isKVPoolCode(file)
	case strings.HasPrefix(path.Base(file), "cache_utils") && strings.HasSuffix(file, ".py"):
		m.kvCacheCopy = true
	case strings.Contains(file, "bitsandbytes/") && (strings.Contains(low, "4bit") || strings.Contains(low, "8bit") ||
		strings.HasSuffix(file, "bitsandbytes/nn/modules.py") || strings.HasSuffix(file, "bitsandbytes/autograd/_functions.py")):
		m.quantizedWeights = true
	case IsPeftFile(file):
		m.peft = true
	}
}

// isKVCacheCode reports whether a Python frame (its file, its function
// name in lower case) is KV-cache code of an inference library:
// transformers' cache module (cache_utils.py: DynamicCache/StaticCache/
// SlidingWindowCache/HybridCache/QuantizedCache and their layers' update,
// lazy_initialization, __init__), vLLM's cache engine (worker/
// cache_engine.py _allocate_kv_cache) and model runners
// (_allocate_kv_cache_tensors, initialize_kv_cache), SGLang's KV pools
// (mem_cache/memory_pool.py: MHATokenToKVPool._create_buffers,
// MLATokenToKVPool), or any function named for the KV cache or
// past_key_values.
func isKVCacheCode(file, low string) bool {
	return isKVCacheFile(file) || strings.Contains(low, "kv_cache") || strings.Contains(low, "past_key_value")
}

// isKVCacheFile reports whether a Python file is a library's KV-cache
// module (isKVCacheCode's files).
func isKVCacheFile(file string) bool {
	return strings.HasSuffix(file, "cache_engine.py") || strings.HasSuffix(file, "transformers/cache_utils.py") ||
		strings.Contains(file, "/mem_cache/memory_pool")
}

// isKVPoolCode reports whether KV-cache code is a serving engine's, whose
// cache is one pool allocated at start-up to fill a fraction of the
// device: vLLM (worker/cache_engine.py, the model runners) and SGLang
// (mem_cache/memory_pool.py).
func isKVPoolCode(file string) bool {
	return strings.HasSuffix(file, "cache_engine.py") || strings.Contains(file, "/mem_cache/memory_pool") ||
		strings.Contains(file, "vllm/") || strings.Contains(file, "sglang/")
}

// isAutogradCall reports whether a Python file is one of PyTorch's entry
// points into the autograd engine: torch.autograd.grad/backward,
// torch.autograd.functional (jvp, vjp, hessian…), torch.func/functorch.
func isAutogradCall(file string) bool {
	return strings.HasSuffix(file, "torch/autograd/__init__.py") || strings.HasSuffix(file, "torch/autograd/functional.py") ||
		strings.Contains(file, "torch/_functorch/") || strings.Contains(file, "torch/func/")
}

// Quadratic reports whether a stack's tensors grow with the square of the
// sequence: attention code, unless a fused kernel (flash, memory-efficient,
// cuDNN) made them.
func (m stackMarkers) Quadratic() bool { return m.Attention && !m.fusedAttention }

// namesAttention reports whether a lower-cased function or module name
// says attention (attention, attn).
func namesAttention(low string) bool {
	return strings.Contains(low, "attention") || strings.Contains(low, "attn")
}

// IsPeftFile reports whether a Python file (forward slashes) belongs to
// peft, the parameter-efficient fine-tuning library: adapters at work.
func IsPeftFile(file string) bool {
	return strings.Contains(file, "/peft/") || strings.HasPrefix(file, "peft/")
}
