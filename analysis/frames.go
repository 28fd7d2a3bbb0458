package analysis

import (
	"path"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/snapshot"
)

// Frame helpers: the noise filter of snapshot-format.md §8, user-code
// detection, allocation-site naming and the phase markers found in stacks.

// noiseNames and noiseFiles are the substrings _memory_viz._frame_filter and
// MemoryViz's frameFilter drop (identical lists in both).
var (
	noiseNames = []string{"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start", "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"}
	noiseFiles = []string{"core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c", "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h"}
)

// isNoise reports whether PyTorch's own viewers hide this frame.
func isNoise(f *snapshot.Frame) bool {
	for _, n := range noiseNames {
		if strings.Contains(f.Name, n) {
			return true
		}
	}
	for _, n := range noiseFiles {
		if strings.Contains(f.Filename, n) {
			return true
		}
	}
	return false
}

// isPython reports whether a frame is a Python frame (as opposed to a C++
// frame of stacks="all", a CPython C frame, or a chrome-trace op span).
func isPython(f *snapshot.Frame) bool {
	return strings.HasSuffix(f.Filename, ".py")
}

// isLibrary reports whether a Python frame belongs to PyTorch or another
// installed package rather than to the user's code.
func isLibrary(file string) bool {
	f := strings.ReplaceAll(file, "\\", "/")
	return strings.Contains(f, "/site-packages/") || strings.Contains(f, "/dist-packages/") ||
		strings.Contains(f, "/lib/python3") || strings.Contains(f, "/torch/") || strings.HasPrefix(f, "torch/") ||
		strings.HasPrefix(f, "<")
}

// isGenerated reports whether a frame runs code that torch.compile
// generated rather than code someone wrote: Inductor's output code — a file
// c<hash>.py (52 characters of base 32) in a folder named by its 2nd and 3rd
// characters, in the cache (/tmp/torchinductor_USER/3u/c3uxhj….py, or
// wherever TORCHINDUCTOR_CACHE_DIR points) — or an FX GraphModule's code
// (<eval_with_key>.N, also what the eager and aot_eager backends run).
func isGenerated(file string) bool {
	f := strings.ReplaceAll(file, "\\", "/")
	if strings.HasPrefix(f, "<eval_with_key>") || strings.Contains(f, "/torchinductor_") && strings.HasSuffix(f, ".py") {
		return true
	}
	base, dir := path.Base(f), path.Base(path.Dir(f))
	if len(base) != 55 || base[0] != 'c' || !strings.HasSuffix(base, ".py") || dir != base[1:3] {
		return false
	}
	for _, r := range base[1:52] {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// isTorch reports whether a Python frame is PyTorch's own code.
func isTorch(file string) bool {
	f := strings.ReplaceAll(file, "\\", "/")
	return strings.Contains(f, "/torch/") || strings.HasPrefix(f, "torch/")
}

// frameString renders a frame as "file.py:LINE function" with the file's
// base name (the short form _memory_viz prints).
func frameString(f *snapshot.Frame) string {
	if f.Filename == "" {
		return f.Name
	}
	base := path.Base(strings.ReplaceAll(f.Filename, "\\", "/"))
	if base == "__init__.py" {
		dir := path.Base(path.Dir(strings.ReplaceAll(f.Filename, "\\", "/")))
		base = dir + "/" + base
	}
	if f.Line < 0 {
		return base + " " + f.Name
	}
	return base + ":" + strconv.FormatInt(f.Line, 10) + " " + f.Name
}

// Site names used when a stack has no frame to name (blocks' sites add the
// category or phase: "<allocated before recording: parameter>",
// "<no frames: backward>").
const (
	SiteNoFrames        = "<no frames>"
	SiteBeforeRecording = "<allocated before recording>"
	SiteUntracked       = "<allocated before the trace window>"
)

// siteRef is an allocation site: its name ("model.py:93 forward",
// "<backward: MulBackward0>") and, when a Python frame names it, that
// frame's file as recorded and its line (−1 when it has none).
type siteRef struct {
	name, file string
	line       int64
}

// CompiledSuffix ends the name of a site whose allocation ran in code that
// torch.compile generated: the site is the user's frame that called it
// ("model.py:41 forward (compiled)").
const CompiledSuffix = " (compiled)"

// siteOf names the allocation site of a stack (siteRefOf's name).
func siteOf(s *snapshot.Snapshot, st snapshot.StackID) string { return siteRefOf(s, st).name }

// siteRefOf finds the allocation site of a stack: the innermost Python frame
// of user code (the noise filter applied, PyTorch and installed packages
// skipped); else the innermost non-PyTorch Python frame; else the innermost
// Python frame; else the autograd node or op of a C++/trace stack. Frames
// of generated code (isGenerated) are skipped: a Python frame outside them
// names the site, marked CompiledSuffix.
func siteRefOf(s *snapshot.Snapshot, st snapshot.StackID) siteRef {
	frames := s.StackOf(st)
	if len(frames) == 0 {
		return siteRef{}
	}
	var nonTorch, anyPy *snapshot.Frame
	var node, op string
	compiled := false
	ref := func(f *snapshot.Frame) siteRef {
		r := frameRef(f)
		if compiled {
			r.name += CompiledSuffix
		}
		return r
	}
	for _, id := range frames {
		f := &s.Frames[id]
		if isNoise(f) {
			continue
		}
		if isGenerated(f.Filename) {
			compiled = true
			continue
		}
		if isPython(f) {
			if !isLibrary(f.Filename) {
				return ref(f)
			}
			if nonTorch == nil && !isTorch(f.Filename) {
				nonTorch = f
			}
			if anyPy == nil {
				anyPy = f
			}
			continue
		}
		if node == "" {
			node = autogradNode(f.Name)
		}
		if op == "" && f.Filename == "" && f.Line == 0 && traceOpName(f.Name) {
			op = f.Name
		}
	}
	switch {
	case nonTorch != nil:
		return ref(nonTorch)
	case anyPy != nil:
		return ref(anyPy)
	case node != "":
		return siteRef{name: "<backward: " + node + ">", line: -1}
	case op != "":
		return siteRef{name: "<op: " + op + ">", line: -1}
	}
	return siteRef{name: SiteNoFrames, line: -1}
}

// frameRef is the site a Python frame names.
func frameRef(f *snapshot.Frame) siteRef {
	return siteRef{name: frameString(f), file: f.Filename, line: f.Line}
}

// traceOpName reports whether a frame name looks like a chrome-trace op or
// annotation span rather than a C++ symbol.
func traceOpName(name string) bool {
	return name != "" && !strings.Contains(name, "(") || strings.HasPrefix(name, "aten::")
}

// autogradNode extracts the autograd node of a C++ frame
// ("torch::autograd::generated::MmBackward0::apply(...)" → "MmBackward0",
// "torch::autograd::AccumulateGrad::apply" → "AccumulateGrad") or of a
// chrome-trace span ("autograd::engine::evaluate_function: MmBackward0").
func autogradNode(name string) string {
	if rest, ok := strings.CutPrefix(name, "autograd::engine::evaluate_function: "); ok {
		return strings.TrimPrefix(rest, "torch::autograd::")
	}
	if i := strings.Index(name, "torch::autograd::generated::"); i >= 0 {
		rest := strings.TrimPrefix(name[i+len("torch::autograd::generated::"):], "details::")
		j := 0
		for j < len(rest) && (rest[j] == '_' || rest[j] >= 'a' && rest[j] <= 'z' || rest[j] >= 'A' && rest[j] <= 'Z' || rest[j] >= '0' && rest[j] <= '9') {
			j++
		}
		if node := strings.TrimSuffix(rest[:j], "_apply_functional"); node != "" {
			return node
		}
	}
	if strings.Contains(name, "torch::autograd::AccumulateGrad") {
		return "AccumulateGrad"
	}
	return ""
}

// plumbing marks C++ frames of the allocator and the dispatcher, which say
// nothing about who allocated.
var plumbing = []string{"CachingAllocator", "empty_generic", "empty_cuda", "_empty_generic", "create_out", "set_output",
	"TensorIterator", "wrap_kernel_functor", "redispatch", "c10::impl::", "StorageImpl", "at::detail::", "::call("}

// displayStack renders a stack for a report, innermost first: the Python
// frames (noise dropped) when there are any, else the C++ frames without
// the allocator and dispatcher plumbing. It is made once per file and
// stack (frameTexts): every device's lists share it.
func (h *History) displayStack(st snapshot.StackID, max int) []string {
	t := h.frameTexts()
	k := [2]int{int(st), max}
	if out, ok := t.stacks[k]; ok {
		return out
	}
	out := t.displayStack(st, max)
	t.stacks[k] = out
	return out
}

func (t *frameTexts) displayStack(st snapshot.StackID, max int) []string {
	s := t.s
	out := []string{}
	var cpp []string
	for _, id := range s.StackOf(st) {
		f := &s.Frames[id]
		if isNoise(f) {
			continue
		}
		if isPython(f) {
			if len(out) < max {
				out = append(out, t.of(id))
			}
			continue
		}
		skip := false
		for _, p := range plumbing {
			if strings.Contains(f.Name, p) {
				skip = true
				break
			}
		}
		if !skip && len(cpp) < max {
			cpp = append(cpp, t.of(id))
		}
	}
	if len(out) == 0 && cpp != nil {
		return cpp
	}
	return out
}

// frameTexts is frameString of each frame of a file, made on first use
// and shared: the stacks of a file's devices name the same frames, and a
// text per stack and device (256 devices of 80 listed allocations with
// stacks of 16 frames of 8 KB) took gigabytes. Used by one goroutine.
type frameTexts struct {
	s    *snapshot.Snapshot
	text []string
	done []bool
	// stacks are the display stacks made so far, by stack and length.
	stacks map[[2]int][]string
	// training is trainingFrame of the file, once known.
	training     string
	trainingDone bool
}

// frameTexts is the texts shared by the file's devices (made for a
// history built alone).
func (h *History) frameTexts() *frameTexts {
	if h.texts == nil {
		h.texts = newFrameTexts(h.Snap)
	}
	return h.texts
}

// trainingFrame is trainingFrame of the file, found once for all its
// devices (it reads every frame's name).
func (t *frameTexts) trainingFrame() string {
	if !t.trainingDone {
		t.training, t.trainingDone = trainingFrame(t.s), true
	}
	return t.training
}

func newFrameTexts(s *snapshot.Snapshot) *frameTexts {
	return &frameTexts{s: s, text: make([]string, len(s.Frames)), done: make([]bool, len(s.Frames)), stacks: map[[2]int][]string{}}
}

// of is the text of frame id.
func (t *frameTexts) of(id snapshot.FrameID) string {
	if !t.done[id] {
		t.text[id], t.done[id] = frameString(&t.s.Frames[id]), true
	}
	return t.text[id]
}

// hint is what a stack or annotation says about the phase of an event.
type hint uint8

const (
	hintNone      hint = iota // no frames at all, or only C++ frames without markers
	hintUser                  // Python frames, but no phase marker
	hintInit                  // model set-up: Module.to/_apply, parameter init, state loading (phase unknown)
	hintForward               // nn.Module __call__ / forward annotation
	hintBackward              // autograd engine, tensor.backward, autograd thread
	hintOptimizer             // torch/optim, Optimizer.step
	hintZeroGrad              // zero_grad
	hintData                  // DataLoader
)

// stackMarkers are facts about one stack, computed once per stack.
type stackMarkers struct {
	hint           hint
	init           bool // model set-up frames (parameters moved or created)
	toDevice       bool // a copy to the device (Tensor.to, Lightning's batch transfer)
	cublas         bool // cuBLAS/cuBLASLt workspace allocation
	accumulateGrad bool // inside AccumulateGrad (gradient written to .grad)
	attention      bool // scaled-dot-product attention / softmax of attention scores
	sdpaMath       bool // the math (materialising) SDPA backend
	fusedAttention bool // a fused attention kernel (flash, memory-efficient, cuDNN; flash-attn, xformers): no seq² tensors
	hasFrames      bool
	// autocastCast: a cast made by autocast (at::autocast::cached_cast,
	// C++ frames), which caches the copies of weights.
	autocastCast bool
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
	// kvPool: the KV cache is a serving engine's preallocated pool (vLLM's
	// cache engine and model runners, SGLang's memory pools), sized by a
	// memory fraction rather than by the batch.
	kvPool bool
	// quantizedWeights: bitsandbytes' quantized layers at work (4-bit or
	// 8-bit matmuls, Linear4bit/Linear8bitLt): the run's base weights are
	// quantized. peft: a parameter-efficient fine-tuning wrapper (peft).
	quantizedWeights, peft bool
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
	for _, id := range frames {
		f := &s.Frames[id]
		name, file := f.Name, strings.ReplaceAll(f.Filename, "\\", "/")
		if strings.Contains(name, "scaled_dot_product_attention") || strings.Contains(name, "_scaled_dot_product") {
			m.attention = true
			if strings.Contains(name, "_math") {
				m.sdpaMath = true
			}
		}
		if strings.Contains(name, "_flash_attention") || strings.Contains(name, "_efficient_attention") ||
			strings.Contains(name, "_cudnn_attention") || strings.HasPrefix(name, "flash_attn") ||
			strings.Contains(name, "memory_efficient_attention") {
			m.attention, m.fusedAttention = true, true
		}
		if !isPython(f) {
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
			case strings.Contains(name, "THPVariable_to(") || strings.Contains(name, "dispatch_to(") || strings.Contains(name, "_to_copy"):
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
		user = true
		low := strings.ToLower(name)
		markKinds(&m, file, name, low)
		if strings.Contains(low, "attention") || strings.Contains(low, "attn") || strings.Contains(strings.ToLower(path.Base(file)), "attention") {
			m.attention = true
		}
		if strings.Contains(low, "closure") {
			closure = true
		}
		if name == "batch_to" || name == "transfer_batch_to_device" || name == "move_data_to_device" {
			m.toDevice = true
		}
		torchFile := isTorch(file)
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
	if m.autocastCast {
		m.toDevice = false // autocast's cast of a weight, not a copy to the device
	}
	switch {
	case fb != hintNone:
		m.hint = fb
	case inner != hintNone:
		m.hint = inner
	case user:
		m.hint = hintUser
	}
	return m
}

// markKinds sets the markers that tell what kind of memory a Python frame
// makes, whatever the phase: a module's weights, a KV cache, quantized or
// adapter layers.
func markKinds(m *stackMarkers, file, name, low string) {
	switch {
	case strings.Contains(file, "torch/nn/modules/") && (name == "__init__" || name == "initialize_parameters"):
		m.moduleInit = true
	case isKVCacheCode(file, low):
		m.kvCache = true
		m.kvPool = m.kvPool || isKVPoolCode(file)
	case strings.HasPrefix(path.Base(file), "cache_utils") && strings.HasSuffix(file, ".py"):
		m.kvCacheCopy = true
	case strings.Contains(file, "bitsandbytes/") && (strings.Contains(low, "4bit") || strings.Contains(low, "8bit") ||
		strings.HasSuffix(file, "bitsandbytes/nn/modules.py") || strings.HasSuffix(file, "bitsandbytes/autograd/_functions.py")):
		m.quantizedWeights = true
	case strings.Contains(file, "/peft/") || strings.HasPrefix(file, "peft/"):
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
	return strings.HasSuffix(file, "cache_engine.py") || strings.HasSuffix(file, "transformers/cache_utils.py") ||
		strings.Contains(file, "/mem_cache/memory_pool") ||
		strings.Contains(low, "kv_cache") || strings.Contains(low, "past_key_value")
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

// isModelFrame reports whether a frame enters a model: an nn.Module call
// (module.py _call_impl / _wrapped_call_impl, a trace's "nn.Module: …"
// span) or a Python function named forward outside PyTorch (a model's own
// forward, in stacks that hold only the user's files). A loop inside it —
// over the model's layers — is part of one call of the model, never a
// loop over steps.
func isModelFrame(f *snapshot.Frame) bool {
	if !isPython(f) {
		return strings.HasPrefix(f.Name, "nn.Module: ")
	}
	file := strings.ReplaceAll(f.Filename, "\\", "/")
	if strings.HasSuffix(file, "torch/nn/modules/module.py") {
		return f.Name == "_call_impl" || f.Name == "_wrapped_call_impl"
	}
	return f.Name == "forward" && !isTorch(file)
}

// stackMemo memoises a function of a stack (siteOf, markersOf): each
// stack's value is computed once, on first use.
type stackMemo[T any] struct {
	s    *snapshot.Snapshot
	of   func(*snapshot.Snapshot, snapshot.StackID) T
	done []bool
	v    []T
}

func newStackMemo[T any](s *snapshot.Snapshot, of func(*snapshot.Snapshot, snapshot.StackID) T) *stackMemo[T] {
	return &stackMemo[T]{s: s, of: of, done: make([]bool, len(s.Stacks)), v: make([]T, len(s.Stacks))}
}

// get is of(stack), the zero value for a stack the snapshot does not have.
func (c *stackMemo[T]) get(st snapshot.StackID) T {
	if int(st) >= len(c.done) {
		var zero T
		return zero
	}
	if !c.done[st] {
		c.v[st] = c.of(c.s, st)
		c.done[st] = true
	}
	return c.v[st]
}

// siteCache finds the allocation site of each stack (siteRefOf).
type siteCache = stackMemo[siteRef]

func newSiteCache(s *snapshot.Snapshot) *siteCache { return newStackMemo(s, siteRefOf) }
