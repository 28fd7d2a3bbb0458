package snapshottest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// TrainingConfig shapes a large generated training run (WriteTraining).
type TrainingConfig struct {
	TargetBytes int64 // approximate file size
	// Model is the run repeated: its layers, sizes and stacks (zero:
	// BenchTraining's).
	Model LeakConfig
	// Gen selects the keys of the entries as Sim.Gen does (0: 'G', with
	// compile_context and user_metadata; 'E' has neither).
	Gen byte
	// SharedStacks writes each distinct frames list once and fetches it
	// from the memo after: the densest shape real snapshots take, about 60
	// bytes an entry. Otherwise, as PyTorch's _snapshot builds them, an
	// alloc and a free_requested have fresh frames lists (their frame dicts
	// fetched from the memo) and the free_completed after a free_requested
	// shares its list: about 200 bytes an entry.
	SharedStacks bool
	// FramelessCompletions writes free_completed entries without a frames
	// key: entries without frames among entries with them, as PyTorch 2.2
	// wrote its segment_free entries.
	FramelessCompletions bool
}

// trainingVersion names the files WriteTraining writes in the benchmarks'
// cache (GeneratedFile): change it with what the generator writes.
const trainingVersion = "2"

// BenchTraining is the model of the benchmarks' generated training runs:
// a 24-layer transformer of hidden size 1,024 on 4,096 tokens a step with a
// 32,000-token vocabulary, recorded with module frames, each iteration in a
// ProfilerStep#N range, the first allocating a kept workspace.
var BenchTraining = LeakConfig{Layers: 24, Hidden: 1024, Tokens: 4096, Vocab: 32000, Profiler: true, FirstExtra: true}

// WriteTraining streams a protocol-4 snapshot of about TargetBytes to w: a
// training run of the leak scenarios' model (zero_grad, forward with
// nn.Module frames, backward in the autograd engine's thread, AdamW) whose
// steady-state iterations repeat, as a long run recorded with
// _record_memory_history(max_entries=N) holds thousands of identical
// iterations. The allocator simulator runs the first iterations until the
// last ones repeat those before them block for block; they are then
// written again and again with their times shifted, so the dump-time
// segments (the simulator's) agree with the trace at any length. Python
// stacks carry what stacks="all" adds around them: the allocator's and the
// dispatcher's C++ frames inside, the interpreter's outside, and for the
// backward (no Python frames) the autograd engine's: 22 to 34 frames an
// allocation, as the real files have 30 to 40. Only the simulated
// iterations are held in memory. It returns the number of trace entries.
func WriteTraining(w io.Writer, c TrainingConfig) (int, error) {
	m := c.Model
	if m.Layers == 0 {
		m = BenchTraining
	}
	if c.Gen == 0 {
		c.Gen = 'G'
	}
	prev, last, iterations, period, err := steadyIteration(m, c.Gen)
	if err != nil {
		return 0, err
	}
	trace := last.dev(0).trace
	head, body := trace[:len(prev.dev(0).trace)], trace[len(prev.dev(0).trace):]
	annots := last.annots
	headAnn, bodyAnn := annots[:len(prev.annots)], annots[len(prev.annots):]

	bw := bufio.NewWriterSize(w, 1<<20)
	p := &trainPickler{streamPickler: &streamPickler{w: bw, strs: map[string]int{}}, dicts: map[*Dict]int{}, lists: map[string]int{},
		shared: c.SharedStacks, framelessCompletions: c.FramelessCompletions, inner: cppFrames(last), outer: interpreterFrames(last), engine: engineFrames(last)}
	snap := last.Snapshot()
	p.raw(0x80, 4)
	p.raw('}')
	p.memoize()
	p.raw('(')
	p.str("segments")
	p.value(snap.Vals[0])
	p.str("device_traces")
	p.raw(']')
	p.memoize()
	p.raw(']')
	p.memoize()
	entries, inBatch := 0, 0
	write := func(e *Dict, dt int64) {
		if inBatch == 0 {
			p.raw('(')
		}
		p.entry(e, dt)
		entries++
		if inBatch++; inBatch == 1000 {
			p.raw('e')
			inBatch = 0
		}
	}
	for _, e := range head {
		write(e, 0)
	}
	// At least one repetition, so the run ends as the simulator's does.
	reps := int64(0)
	for reps == 0 || p.n < c.TargetBytes {
		for _, e := range body {
			write(e, reps*period)
		}
		reps++
	}
	if inBatch > 0 {
		p.raw('e')
	}
	p.raw('a')
	for k := 2; k < len(snap.Keys); k++ {
		p.str(snap.Keys[k])
		if snap.Keys[k] != "external_annotations" {
			p.value(snap.Vals[k])
			continue
		}
		p.raw(']')
		p.memoize()
		n := 0
		for _, a := range headAnn {
			n += p.annotation(a, 0, 0, n)
		}
		for r := int64(0); r < reps; r++ {
			for _, a := range bodyAnn {
				n += p.annotation(a, r*period, int(r)*iterations, n)
			}
		}
		if n > 0 {
			p.raw('e') // the last batch
		}
	}
	p.raw('u')
	p.raw('.')
	if p.err != nil {
		return entries, p.err
	}
	return entries, bw.Flush()
}

// cppFrames are the C++ frames stacks="all" records inside an allocation's
// Python frames: the unwinder, the caching allocator, the empty tensor.
func cppFrames(s *Sim) []*Dict {
	return []*Dict{
		s.F("??", 0, "torch::unwind::unwind()"),
		s.F("??", 0, "torch::CapturedTraceback::gather(bool, bool, bool)"),
		s.F("memory_snapshot.cpp", 0, "torch::cuda::(anonymous namespace)::gather_with_cpp()"),
		s.F("CUDACachingAllocator.cpp", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)"),
		s.F("", 0, "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed char, unsigned long, CUstream_st*)"),
		s.F("", 0, "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)"),
		s.F("", 0, "at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)"),
		s.F("??", 0, "at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)"),
		s.F("??", 0, "at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>, std::optional<c10::MemoryFormat>)"),
		s.F("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions const&)"),
		s.F("??", 0, "at::TensorIteratorBase::allocate_or_resize_outputs()"),
		s.F("??", 0, "at::TensorIteratorBase::build(at::TensorIteratorConfig&)"),
	}
}

// engineFrames are the C++ frames stacks="all" records outside the
// allocations of a backward: the autograd engine's thread.
func engineFrames(s *Sim) []*Dict {
	return []*Dict{
		s.F("", 0, "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
		s.F("", 0, "torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
		s.F("", 0, "torch::autograd::call_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&)"),
		s.F("", 0, "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)"),
		s.F("", 0, "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"),
		s.F("", 0, "torch::autograd::Engine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)"),
		s.F("", 0, "torch::autograd::python::PythonEngine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)"),
		s.F("??", 0, "execute_native_thread_routine"),
		s.F("??", 0, "start_thread"),
		s.F("??", 0, "clone"),
	}
}

// interpreterFrames are the C++ frames stacks="all" records outside a
// script's Python frames: CPython running the script's module.
func interpreterFrames(s *Sim) []*Dict {
	return []*Dict{
		s.F("/usr/local/src/conda/python-3.11.9/Python/ceval.c", 5657, "_PyEval_EvalFrameDefault"),
		s.F("/usr/local/src/conda/python-3.11.9/Python/pythonrun.c", 1717, "run_eval_code_obj"),
		s.F("/usr/local/src/conda/python-3.11.9/Python/pythonrun.c", 1738, "run_mod"),
		s.F("/usr/local/src/conda/python-3.11.9/Python/pythonrun.c", 1634, "pyrun_file"),
		s.F("/usr/local/src/conda/python-3.11.9/Python/pythonrun.c", 440, "_PyRun_SimpleFileObject"),
		s.F("/usr/local/src/conda/python-3.11.9/Python/pythonrun.c", 79, "_PyRun_AnyFileObject"),
		s.F("/usr/local/src/conda/python-3.11.9/Modules/main.c", 680, "pymain_run_file_obj"),
		s.F("/usr/local/src/conda/python-3.11.9/Modules/main.c", 614, "Py_RunMain"),
		s.F("??", 0, "__libc_start_call_main"),
		s.F("??", 0, "_start"),
	}
}

// steadyIteration simulates m for 1, 2, … iterations until the last k
// (1 to 3: a loop that keeps the previous iteration's batch or logits
// alternates between two sets of blocks) allocate and free the same blocks
// as the k before them. It returns the simulations of n−k and of n
// iterations, and the time k iterations take.
func steadyIteration(m LeakConfig, gen byte) (prev, last *Sim, k int, period int64, err error) {
	var sims []*Sim
	var ends []int // trace entries after each iteration
	for n := 1; n <= 10; n++ {
		m.Steps = n
		s := NewSim()
		s.Gen = gen
		runTrainLoop(s, m, trainFault{})
		sims = append(sims, s)
		ends = append(ends, len(s.dev(0).trace))
		tr := s.dev(0).trace
		for k := 1; k <= 3 && n-2*k >= 1; k++ {
			last, before := tr[ends[n-k-1]:], tr[ends[n-2*k-1]:ends[n-k-1]]
			if sameBlocks(last, before) {
				return sims[n-k-1], s, k, s.timeUS - sims[n-k-1].timeUS, nil
			}
		}
	}
	return nil, nil, 0, 0, fmt.Errorf("snapshottest: the iterations of %+v never repeat", m)
}

// sameBlocks reports whether two runs of trace entries do the same actions
// on the same addresses with the same sizes.
func sameBlocks(a, b []*Dict) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for i := range a {
		for _, k := range []string{"action", "addr", "size"} {
			if a[i].get(k) != b[i].get(k) {
				return false
			}
		}
	}
	return true
}

// get returns the value of key k (nil when absent).
func (d *Dict) get(k string) any {
	for i, key := range d.Keys {
		if key == k {
			return d.Vals[i]
		}
	}
	return nil
}

// trainPickler streams what WriteTraining writes: frame dicts are written
// once and fetched after, trace entries always fresh.
type trainPickler struct {
	*streamPickler
	dicts  map[*Dict]int  // frame dicts (and other shared dicts) already written
	lists  map[string]int // with shared: frames lists already written, by their frames
	shared bool
	// framelessCompletions: see TrainingConfig.
	framelessCompletions bool
	// inner and outer are added around every stack with Python frames,
	// inner and engine around the others.
	inner, outer, engine []*Dict
	// freeReq is the address and the frames list's memo index of the
	// last free_requested written (its free_completed shares the list).
	freeReq struct {
		addr any
		list int
	}
}

// entry writes one trace entry, its time shifted by dt microseconds.
func (p *trainPickler) entry(e *Dict, dt int64) {
	p.raw('}')
	p.memoize()
	p.raw('(')
	frameless := p.framelessCompletions && e.get("action") == "free_completed"
	for i, k := range e.Keys {
		if k == "frames" && frameless {
			continue
		}
		p.str(k)
		switch k {
		case "frames":
			p.entryFrames(e, e.Vals[i].(*List))
		case "time_us":
			p.int(e.Vals[i].(int64) + dt)
		case "compile_context":
			// PyTorch makes a string object per entry, which the pickler
			// (memoizing by identity) writes afresh each time.
			v := e.Vals[i].(string)
			p.raw(0x8c, byte(len(v)))
			p.raw([]byte(v)...)
			p.memoize()
		default:
			p.value(e.Vals[i])
		}
	}
	if e.get("frames") == nil && !frameless {
		// The simulator leaves the frames out of an entry without Python
		// frames; PyTorch writes its C++ frames.
		p.str("frames")
		p.entryFrames(e, &List{})
	}
	p.raw('u')
}

// entryFrames writes the frames list l of entry e: a free_completed shares
// the list of the free_requested before it.
func (p *trainPickler) entryFrames(e *Dict, l *List) {
	action, addr := e.get("action"), e.get("addr")
	if action == "free_completed" && !p.shared && p.freeReq.addr == addr {
		p.get(p.freeReq.list)
		return
	}
	idx := p.frames(l)
	if action == "free_requested" {
		p.freeReq.addr, p.freeReq.list = addr, idx
	}
}

// annotation writes annotation a, its time shifted by dt and a
// ProfilerStep#N renumbered N+steps, as item n of the list; it returns 1.
func (p *trainPickler) annotation(a *Dict, dt int64, steps, n int) int {
	if n%1000 == 0 {
		if n > 0 {
			p.raw('e')
		}
		p.raw('(')
	}
	p.raw('}')
	p.memoize()
	p.raw('(')
	for i, k := range a.Keys {
		p.str(k)
		switch v := a.Vals[i].(type) {
		case int64:
			if k == "time_us" {
				v += dt
			}
			p.int(v)
		case string:
			if num, ok := strings.CutPrefix(v, "ProfilerStep#"); ok && steps > 0 {
				step, _ := strconv.Atoi(num)
				v = "ProfilerStep#" + strconv.Itoa(step+steps)
			}
			p.str(v)
		default:
			p.value(v)
		}
	}
	p.raw('u')
	return 1
}

// frames writes the frames list of an entry, the C++ frames around it,
// and returns its memo index: fresh, or (shared) fetched when a list of the
// same frames was written before.
func (p *trainPickler) frames(l *List) int {
	var items []any
	for _, f := range p.inner {
		items = append(items, f)
	}
	items = append(items, l.Items...)
	outer := p.outer
	if len(l.Items) == 0 {
		outer = p.engine // no Python frames: the autograd engine's thread
	}
	for _, f := range outer {
		items = append(items, f)
	}
	var key strings.Builder
	if p.shared {
		// The simulator makes one dict per frame (Sim.F): the dicts'
		// identities name the list's content.
		for _, it := range items {
			fmt.Fprintf(&key, "%p,", it)
		}
		if idx, ok := p.lists[key.String()]; ok {
			p.get(idx)
			return idx
		}
	}
	p.raw(']')
	idx := p.memoize()
	if p.shared {
		p.lists[key.String()] = idx
	}
	p.items(&List{Items: items})
	return idx
}

// list writes a fresh list of items.
func (p *trainPickler) list(l *List) {
	p.raw(']')
	p.memoize()
	p.items(l)
}

// items appends l's items to the list on the stack as CPython batches them.
func (p *trainPickler) items(l *List) {
	if l == nil {
		return
	}
	for i := 0; i < len(l.Items); i += 1000 {
		end := min(len(l.Items), i+1000)
		if end-i > 1 {
			p.raw('(')
		}
		for _, it := range l.Items[i:end] {
			p.value(it)
		}
		if end-i > 1 {
			p.raw('e')
		} else {
			p.raw('a')
		}
	}
}

// value writes a value of the simulator's snapshot; dicts are memoized.
func (p *trainPickler) value(v any) {
	switch x := v.(type) {
	case nil:
		p.raw('N')
	case bool:
		if x {
			p.raw(0x88)
		} else {
			p.raw(0x89)
		}
	case int:
		p.int(int64(x))
	case int64:
		p.int(x)
	case uint64:
		p.int(int64(x))
	case float64:
		p.raw('G')
		binary.BigEndian.PutUint64(p.tmp[:8], math.Float64bits(x))
		p.raw(p.tmp[:8]...)
	case string:
		p.str(x)
	case Tuple:
		if len(x) == 0 || len(x) > 3 {
			p.raw('(')
		}
		for _, it := range x {
			p.value(it)
		}
		if len(x) == 0 || len(x) > 3 {
			p.raw('t')
		} else {
			p.raw(0x84 + byte(len(x)))
		}
		p.memoize()
	case *Dict:
		if idx, ok := p.dicts[x]; ok {
			p.get(idx)
			return
		}
		p.raw('}')
		p.dicts[x] = p.memoize()
		p.raw('(')
		for i, k := range x.Keys {
			p.str(k)
			p.value(x.Vals[i])
		}
		p.raw('u')
	case *List:
		p.list(x)
	default:
		panic(fmt.Sprintf("snapshottest: cannot pickle %T", v))
	}
}
