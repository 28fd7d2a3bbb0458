package history

import (
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// Frame helpers: the noise filter PyTorch's memory viewers apply, user-code
// detection and allocation-site naming (the markers of a stack are in
// markers.go).

// noiseNames and noiseFiles are the substrings _memory_viz._frame_filter and
// MemoryViz's frameFilter drop (identical lists in both).
var (
	noiseNames = []string{"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start", "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"}
	noiseFiles = []string{"core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c", "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h"}
)

// IsNoise reports whether PyTorch's own viewers hide this frame.
func IsNoise(f *snapshot.Frame) bool {
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

// IsPython reports whether a frame is a Python frame (as opposed to a C++
// frame of stacks="all", a CPython C frame, or a chrome-trace op span).
func IsPython(f *snapshot.Frame) bool {
	return strings.HasSuffix(f.Filename, ".py")
}

// IsLibrary reports whether a Python frame belongs to PyTorch or another
// installed package rather than to the user's code.
func IsLibrary(file string) bool {
	f := strings.ReplaceAll(file, "\\", "/")
	return strings.Contains(f, "/site-packages/") || strings.Contains(f, "/dist-packages/") ||
		strings.Contains(f, "/lib/python3") || strings.Contains(f, "/torch/") || strings.HasPrefix(f, "torch/") ||
		strings.HasPrefix(f, "<")
}

// IsGenerated reports whether a frame runs code that torch.compile
// generated rather than code someone wrote: Inductor's output code — a file
// c<hash>.py (52 characters of base 32) in a folder named by its 2nd and 3rd
// characters, in the cache (/tmp/torchinductor_USER/3u/c3uxhj….py, or
// wherever TORCHINDUCTOR_CACHE_DIR points) — or an FX GraphModule's code
// (<eval_with_key>.N, also what the eager and aot_eager backends run).
func IsGenerated(file string) bool {
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

// IsTorch reports whether a Python frame is PyTorch's own code.
func IsTorch(file string) bool {
	f := strings.ReplaceAll(file, "\\", "/")
	return strings.Contains(f, "/torch/") || strings.HasPrefix(f, "torch/")
}

// FrameString renders a frame as "file.py:LINE function" with the file's
// base name (the short form _memory_viz prints).
func FrameString(f *snapshot.Frame) string {
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

// siteRef is an allocation site: its name ("model.py:93 forward",
// "<backward: MulBackward0>") and, when a Python frame names it, that
// frame's file as recorded and its line (−1 when it has none).
type siteRef struct {
	Name, File string
	Line       int64
}

// CompiledSuffix ends the name of a site whose allocation ran in code that
// torch.compile generated: the site is the user's frame that called it
// ("model.py:41 forward (compiled)").
const CompiledSuffix = " (compiled)"

// SiteOf names the allocation site of a stack (siteRefOf's name).
func SiteOf(s *snapshot.Snapshot, st snapshot.StackID) string { return SiteRefOf(s, st).Name }

// SiteRefOf finds the allocation site of a stack: the innermost Python frame
// of user code (the noise filter applied, PyTorch and installed packages
// skipped); else the innermost non-PyTorch Python frame; else the innermost
// Python frame; else the autograd node or op of a C++/trace stack. Frames
// of generated code (isGenerated) are skipped: a Python frame outside them
// names the site, marked CompiledSuffix.
func SiteRefOf(s *snapshot.Snapshot, st snapshot.StackID) siteRef {
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
			r.Name += CompiledSuffix
		}
		return r
	}
	for _, id := range frames {
		f := &s.Frames[id]
		if IsNoise(f) {
			continue
		}
		if IsGenerated(f.Filename) {
			compiled = true
			continue
		}
		if IsPython(f) {
			if !IsLibrary(f.Filename) {
				return ref(f)
			}
			if nonTorch == nil && !IsTorch(f.Filename) {
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
		return siteRef{Name: "<backward: " + node + ">", Line: -1}
	case op != "":
		return siteRef{Name: "<op: " + op + ">", Line: -1}
	}
	return siteRef{Name: result.SiteNoFrames, Line: -1}
}

// frameRef is the site a Python frame names.
func frameRef(f *snapshot.Frame) siteRef {
	return siteRef{Name: FrameString(f), File: f.Filename, Line: f.Line}
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

// DisplayStack renders a stack for a report, innermost first: the Python
// frames (noise dropped) when there are any, else the C++ frames without
// the allocator and dispatcher plumbing. It is made once per file and
// stack (frameTexts): every device's lists share it.
func (h *History) DisplayStack(st snapshot.StackID, max int) []string {
	t := h.FrameTexts()
	t.mu.Lock()
	defer t.mu.Unlock()
	k := [2]int{int(st), max}
	if out, ok := t.stacks[k]; ok {
		return out
	}
	out := t.DisplayStack(st, max)
	t.stacks[k] = out
	return out
}

// DisplayStack renders a stack as the report shows it, innermost frame
// first and at most max frames, without History.DisplayStack's memo.
func (t *FrameTexts) DisplayStack(st snapshot.StackID, max int) []string {
	s := t.s
	out := []string{}
	var cpp []string
	for _, id := range s.StackOf(st) {
		f := &s.Frames[id]
		if IsNoise(f) {
			continue
		}
		if IsPython(f) {
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
// stacks of 16 frames of 8 KB) took gigabytes. History.DisplayStack may be
// called from several goroutines; the rest by one at a time.
type FrameTexts struct {
	// mu guards the texts and stacks History.DisplayStack makes: the
	// analysis lists one device's allocations while it makes the OOM
	// post-mortem of the next.
	mu   sync.Mutex
	s    *snapshot.Snapshot
	text []string
	done []bool
	// stacks are the display stacks made so far, by stack and length.
	stacks map[[2]int][]string
	// training is trainingFrame of the file, once known.
	training     string
	trainingDone bool
}

// FrameTexts is the texts shared by the file's devices (made for a
// history built alone).
func (h *History) FrameTexts() *FrameTexts {
	if h.Texts == nil {
		h.Texts = NewFrameTexts(h.Snap)
	}
	return h.Texts
}

// TrainingFrame is trainingFrame of the file, found once for all its
// devices (it reads every frame's name).
func (t *FrameTexts) TrainingFrame() string {
	if !t.trainingDone {
		t.training, t.trainingDone = trainingFrame(t.s), true
	}
	return t.training
}

// NewFrameTexts makes the frame texts of a file, rendered on first use and
// shared by its devices.
func NewFrameTexts(s *snapshot.Snapshot) *FrameTexts {
	return &FrameTexts{s: s, text: make([]string, len(s.Frames)), done: make([]bool, len(s.Frames)), stacks: map[[2]int][]string{}}
}

// of is the text of frame id.
func (t *FrameTexts) of(id snapshot.FrameID) string {
	if !t.done[id] {
		t.text[id], t.done[id] = FrameString(&t.s.Frames[id]), true
	}
	return t.text[id]
}

// IsModelFrame reports whether a frame enters a model: an nn.Module call
// (module.py _call_impl / _wrapped_call_impl, a trace's "nn.Module: …"
// span) or a Python function named forward outside PyTorch (a model's own
// forward, in stacks that hold only the user's files). A loop inside it —
// over the model's layers — is part of one call of the model, never a
// loop over steps.
func IsModelFrame(f *snapshot.Frame) bool {
	if !IsPython(f) {
		return strings.HasPrefix(f.Name, "nn.Module: ")
	}
	file := strings.ReplaceAll(f.Filename, "\\", "/")
	if strings.HasSuffix(file, "torch/nn/modules/module.py") {
		return f.Name == "_call_impl" || f.Name == "_wrapped_call_impl"
	}
	return f.Name == "forward" && !IsTorch(file)
}

// stackMemo memoises a function of a stack (siteOf, markersOf): each
// stack's value is computed once, on first use. It is made for one device,
// which uses a few of a file's stacks when the file has many devices: a
// table of every stack of the file per device cost their product (256
// devices of 2,000 stacks each, 62 MB: 13 GB allocated), so the memo is a
// map when the file has far more stacks than the device can use. In its
// table each value is kept once: a stack holds the number of its value
// (four bytes, where a value is 40 or 48), since a file's hundreds of
// thousands of stacks have a few hundred sites and far fewer markers.
type stackMemo[T comparable] struct {
	s  *snapshot.Snapshot
	of func(*snapshot.Snapshot, snapshot.StackID) T
	// num[st] is 1 + the index in vals of stack st's value (0: not yet
	// computed); number finds a value's index.
	num    []uint32
	vals   []*T
	number map[T]uint32
	m      map[snapshot.StackID]*T // instead of num and vals, for a few of many stacks
}

// NewStackMemo memoises of for a device that looks up at most about uses
// stacks (its events and blocks).
func NewStackMemo[T comparable](s *snapshot.Snapshot, uses int, of func(*snapshot.Snapshot, snapshot.StackID) T) *stackMemo[T] {
	if len(s.Stacks) > 4*uses+4096 {
		return &stackMemo[T]{s: s, of: of, m: map[snapshot.StackID]*T{}}
	}
	return &stackMemo[T]{s: s, of: of, num: make([]uint32, len(s.Stacks)), number: map[T]uint32{}}
}

// Get is of(stack), the zero value for a stack the snapshot does not have.
func (c *stackMemo[T]) Get(st snapshot.StackID) T {
	if int(st) >= len(c.s.Stacks) {
		var zero T
		return zero
	}
	return *c.ref(st)
}

// ref is get's value in place: it stays valid, and the same, while c
// lives (the zero value's for a stack the snapshot does not have). Stacks
// of the same value share it.
func (c *stackMemo[T]) ref(st snapshot.StackID) *T {
	if int(st) >= len(c.s.Stacks) {
		return new(T)
	}
	if c.m != nil {
		p, ok := c.m[st]
		if !ok {
			p = new(T)
			*p = c.of(c.s, st)
			c.m[st] = p
		}
		return p
	}
	if k := c.num[st]; k != 0 {
		return c.vals[k-1]
	}
	v := c.of(c.s, st)
	k, ok := c.number[v]
	if !ok {
		c.vals = append(c.vals, &v)
		k = uint32(len(c.vals))
		c.number[v] = k
	}
	c.num[st] = k
	return c.vals[k-1]
}

// StackUses is about how many stacks a device's memos look up: one per
// event and per block of its segments.
func StackUses(d *snapshot.Device) int {
	n := len(d.Events)
	for i := range d.Segments {
		n += len(d.Segments[i].Blocks)
	}
	return n
}

// SiteCache finds the allocation site of each stack (siteRefOf).
type SiteCache = stackMemo[siteRef]

// NewSiteCache makes an empty cache of the sites of the device's stacks.
func (h *History) NewSiteCache() *SiteCache {
	return NewStackMemo(h.Snap, StackUses(h.Device), SiteRefOf)
}
