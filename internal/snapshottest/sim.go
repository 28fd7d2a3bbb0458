package snapshottest

import (
	"fmt"
	"sort"
	"strings"
)

// Sim simulates PyTorch's CUDA caching allocator on one or more devices and
// records what _record_memory_history would: trace entries with shared frame
// dicts, segments and blocks at dump time, and record_function annotations.
// It is how the project makes realistic snapshots of its own.
type Sim struct {
	// Gen selects the keys written: 'B' (2.1) … 'G' (2.10); default 'G'.
	Gen byte
	// NoTrace drops device_traces entries (recording off); StateOnly keeps
	// block stacks but no trace.
	NoTrace, StateOnly bool
	// Expandable sets allocator_settings.expandable_segments; the rest of a
	// free block is then split off whenever it is 512 B or more.
	Expandable bool
	// MaxSplitSize is allocator_settings.max_split_size (0: unlimited):
	// blocks of a rounded request at least this large are never split.
	MaxSplitSize int64
	// CapacityBytes is the simulated device size (for OOM entries); 0 = 80 GiB.
	CapacityBytes int64
	// LimitBytes, when > 0, is the memory the allocator may reserve on each
	// device: an allocation that needs a new segment beyond it frees the
	// cache and retries, then records an oom entry and raises OutOfMemory
	// (a panic that RunUntilOOM turns into the end of the run).
	LimitBytes int64
	// DeviceBase is added to every device index the calls name when the
	// snapshot is written: a process of a torchrun job works on its local
	// device, cuda:LOCAL_RANK, and its snapshot says so.
	DeviceBase int

	timeUS   int64
	nextAddr uint64
	frames   map[string]*Dict
	devs     map[int]*simDevice
	annots   []*Dict
	peak     map[int]int64 // highest allocated bytes (blocks) per device
	peakReq  map[int]int64 // highest requested bytes of the live blocks per device
	Stream   int64
	// Pool is the memory pool allocations are served from: (0, 0) the
	// default; a CUDA graph's capture (torch.cuda.graph) allocates from
	// its private pool (n, 0), in segments of its own.
	Pool [2]int64
	// StepAllocated is device 0's allocated bytes (blocks, as
	// memory_allocated() counts) before the first step of a scenario that
	// has steps ([0]) and after each step k ([k]), for test assertions.
	StepAllocated []int64
}

type simDevice struct {
	segs       []*simSeg
	trace      []*Dict
	live       map[uint64]*simBlock
	allocated  int64   // bytes of the live blocks (memory_allocated())
	requested  int64   // requested bytes of the live blocks
	allocAfter []int64 // allocated bytes after each trace entry
}

// OutOfMemory is what Alloc raises (panics with) when LimitBytes is reached,
// as PyTorch raises torch.OutOfMemoryError.
type OutOfMemory struct {
	Device    int   // as the calls name it (before DeviceBase)
	Requested int64 // the rounded request
}

// RunUntilOOM runs fn, a training script against s, and reports whether it
// ended with an out-of-memory error: the snapshot is then the one an OOM
// observer dumps, at the failed allocation.
func (s *Sim) RunUntilOOM(fn func()) (oom *OutOfMemory) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(OutOfMemory)
			if !ok {
				panic(r)
			}
			oom = &e
		}
	}()
	fn()
	return nil
}

// PeakAllocated is the highest sum of the live blocks' sizes (allocator
// blocks, as memory_allocated() counts them) that device d reached: what a
// replay of the snapshot's trace must find as the peak.
func (s *Sim) PeakAllocated(d int) int64 { return s.peak[d] }

// PeakRequested is the highest sum of the live blocks' requested sizes (what
// their alloc entries record) that device d reached: the peak of a replay
// that adds the trace's sizes as they are.
func (s *Sim) PeakRequested(d int) int64 { return s.peakReq[d] }

type simSeg struct {
	addr   uint64
	size   int64
	small  bool
	pool   [2]int64
	stream int64 // the stream that allocated it
	stack  *List
	blocks []*simBlock
}

type simBlock struct {
	addr  uint64
	size  int64
	req   int64
	state string
	stack *List
}

// NewSim starts a simulation at a fixed epoch time.
func NewSim() *Sim {
	return &Sim{Gen: 'G', timeUS: 1_754_000_000_000_000, nextAddr: 0x7f0000000000, frames: map[string]*Dict{}, devs: map[int]*simDevice{}, peak: map[int]int64{}, peakReq: map[int]int64{}}
}

// F returns the shared frame dict for file:line name.
func (s *Sim) F(file string, line int, name string) *Dict {
	k := fmt.Sprintf("%s\x00%d\x00%s", file, line, name)
	if f, ok := s.frames[k]; ok {
		return f
	}
	f := D("filename", file, "line", line, "name", name)
	s.frames[k] = f
	return f
}

// Stack makes a frames list, innermost first.
func (s *Sim) Stack(frames ...*Dict) *List {
	l := &List{}
	for _, f := range frames {
		l.Items = append(l.Items, f)
	}
	return l
}

// Tick advances the clock by us microseconds.
func (s *Sim) Tick(us int64) { s.timeUS += us }

func (s *Sim) dev(d int) *simDevice {
	if x, ok := s.devs[d]; ok {
		return x
	}
	x := &simDevice{live: map[uint64]*simBlock{}}
	s.devs[d] = x
	return x
}

func roundSize(n int64) int64 {
	if n < 512 {
		return 512
	}
	return (n + 511) / 512 * 512
}

func segmentSize(n int64) int64 {
	switch {
	case n <= 1<<20:
		return 2 << 20
	case n < 10<<20:
		return 20 << 20
	}
	return (n + 2<<20 - 1) / (2 << 20) * (2 << 20)
}

func (s *Sim) entry(d int, action string, addr uint64, size int64, stack *List) *Dict {
	e := D("action", action, "addr", addr, "size", size, "stream", s.Stream)
	if stack != nil && len(stack.Items) > 0 {
		e.Set("frames", stack)
	}
	if s.Gen >= 'C' {
		e.Set("time_us", s.timeUS)
	}
	if s.Gen >= 'F' {
		e.Set("compile_context", "N/A")
	}
	if s.Gen >= 'G' {
		e.Set("user_metadata", "")
	}
	s.timeUS++
	if !s.NoTrace && !s.StateOnly {
		dv := s.dev(d)
		dv.trace = append(dv.trace, e)
		dv.allocAfter = append(dv.allocAfter, dv.allocated)
	}
	return e
}

// AllocatedAfter returns device d's allocated bytes (blocks, as
// memory_allocated() counts them) after each of its trace entries.
func (s *Sim) AllocatedAfter(d int) []int64 { return s.dev(d).allocAfter }

// Alloc allocates size bytes on device d with the given stack and returns the
// block address. It reuses a cached block (best fit, splitting it) or maps a
// new segment, as the caching allocator does.
func (s *Sim) Alloc(d int, size int64, stack *List) uint64 {
	dv := s.dev(d)
	rounded := roundSize(size)
	small := size <= 1<<20
	var best *simBlock
	var bestSeg *simSeg
	var bestIdx int
	for _, g := range dv.segs {
		if g.small != small || g.pool != s.Pool {
			continue
		}
		for i, b := range g.blocks {
			if b.state == "inactive" && b.size >= rounded && (best == nil || b.size < best.size) {
				best, bestSeg, bestIdx = b, g, i
			}
		}
	}
	if best == nil && s.LimitBytes > 0 && s.Reserved(d)+segmentSize(rounded) > s.LimitBytes {
		// The allocator frees its cache and retries before failing.
		s.EmptyCache(d)
		if s.Reserved(d)+segmentSize(rounded) > s.LimitBytes {
			s.OOM(d, size, max(s.LimitBytes-s.Reserved(d), 0), stack)
			panic(OutOfMemory{Device: d, Requested: rounded})
		}
	}
	if best == nil {
		segSize := segmentSize(rounded)
		addr := s.nextAddr
		s.nextAddr += uint64(segSize) + 0x200000
		g := &simSeg{addr: addr, size: segSize, small: small, stack: stack, pool: s.Pool, stream: s.Stream}
		s.entry(d, "segment_alloc", addr, segSize, stack)
		best = &simBlock{addr: addr, size: segSize, state: "inactive"}
		g.blocks = []*simBlock{best}
		dv.segs = append(dv.segs, g)
		bestSeg, bestIdx = g, 0
	}
	// should_split (CUDACachingAllocator.cpp): the small pool and expandable
	// segments split off a rest of 512 B or more, the large pool a rest of
	// more than 1 MiB, and only below max_split_size.
	rem := best.size - rounded
	split := rem >= 512 && (small || s.Expandable)
	if !small && !s.Expandable {
		split = rem > 1<<20 && (s.MaxSplitSize <= 0 || rounded < s.MaxSplitSize)
	}
	if split {
		rest := &simBlock{addr: best.addr + uint64(rounded), size: rem, state: "inactive"}
		best.size = rounded
		bestSeg.blocks = append(bestSeg.blocks[:bestIdx+1], append([]*simBlock{rest}, bestSeg.blocks[bestIdx+1:]...)...)
	}
	best.state, best.req, best.stack = "active_allocated", size, stack
	dv.live[best.addr] = best
	dv.allocated += best.size
	dv.requested += size
	s.peak[d] = max(s.peak[d], dv.allocated)
	s.peakReq[d] = max(s.peakReq[d], dv.requested)
	s.entry(d, "alloc", best.addr, size, stack)
	return best.addr
}

// Free frees the block at addr on device d (free_requested + free_completed)
// and merges it with free neighbours.
func (s *Sim) Free(d int, addr uint64) {
	dv := s.dev(d)
	b, ok := dv.live[addr]
	if !ok {
		panic(fmt.Sprintf("snapshottest: free of unknown block %#x", addr))
	}
	delete(dv.live, addr)
	dv.allocated -= b.size
	dv.requested -= b.req
	s.entry(d, "free_requested", addr, b.req, b.stack)
	s.entry(d, "free_completed", addr, b.req, b.stack)
	b.state = "inactive"
	for _, g := range dv.segs {
		for i := 0; i < len(g.blocks)-1; {
			if g.blocks[i].state == "inactive" && g.blocks[i+1].state == "inactive" {
				g.blocks[i].size += g.blocks[i+1].size
				g.blocks = append(g.blocks[:i+1], g.blocks[i+2:]...)
				continue
			}
			i++
		}
	}
}

// EmptyCache releases every fully free segment (segment_free entries).
func (s *Sim) EmptyCache(d int) {
	dv := s.dev(d)
	var keep []*simSeg
	for _, g := range dv.segs {
		if len(g.blocks) == 1 && g.blocks[0].state == "inactive" {
			s.entry(d, "segment_free", g.addr, g.size, nil)
			continue
		}
		keep = append(keep, g)
	}
	dv.segs = keep
}

// OOM records a failed allocation of size bytes with device free bytes left.
func (s *Sim) OOM(d int, size int64, deviceFree int64, stack *List) {
	e := D("action", "oom", "device_free", deviceFree, "size", roundSize(size), "stream", s.Stream)
	if stack != nil && len(stack.Items) > 0 {
		e.Set("frames", stack)
	}
	if s.Gen >= 'C' {
		e.Set("time_us", s.timeUS)
	}
	s.timeUS++
	dv := s.dev(d)
	dv.trace = append(dv.trace, e)
	dv.allocAfter = append(dv.allocAfter, dv.allocated)
}

// Annotate records a record_function range around fn (external_annotations).
func (s *Sim) Annotate(d int, name string, fn func()) {
	s.annots = append(s.annots, D("stage", "START", "name", name, "device", s.DeviceBase+d, "time_us", s.timeUS))
	s.timeUS++
	fn()
	s.annots = append(s.annots, D("stage", "END", "name", name, "device", s.DeviceBase+d, "time_us", s.timeUS))
	s.timeUS++
}

// Reserved returns the reserved bytes on device d.
func (s *Sim) Reserved(d int) int64 {
	var n int64
	for _, g := range s.dev(d).segs {
		n += g.size
	}
	return n
}

// Allocated returns the allocated (rounded) bytes on device d.
func (s *Sim) Allocated(d int) int64 {
	var n int64
	for _, b := range s.dev(d).live {
		n += b.size
	}
	return n
}

// SetPool marks every segment of device d allocated from now on… (for
// private-pool fixtures, set the pool of existing segments).
func (s *Sim) SetPool(d int, pool [2]int64) {
	for _, g := range s.dev(d).segs {
		g.pool = pool
	}
}

// MarkPendingFree turns a live block into active_pending_free (a block freed
// while another stream still uses it: record_stream).
func (s *Sim) MarkPendingFree(d int, addr uint64) {
	if b, ok := s.dev(d).live[addr]; ok {
		b.state = "active_pending_free"
	}
}

// Snapshot builds the dict _snapshot() would return.
func (s *Sim) Snapshot() *Dict {
	var ids []int
	maxDev := 0
	for d := range s.devs {
		ids = append(ids, d)
		maxDev = max(maxDev, d)
	}
	sort.Ints(ids)
	segs := &List{}
	for _, d := range ids {
		dv := s.devs[d]
		sort.Slice(dv.segs, func(i, j int) bool { return dv.segs[i].addr < dv.segs[j].addr })
		for _, g := range dv.segs {
			blocks := &List{}
			var alloc, active, req int64
			for _, b := range g.blocks {
				bd := D("address", b.addr, "size", b.size, "requested_size", b.req, "state", b.state)
				st := b.stack
				if b.state == "inactive" || st == nil {
					st = &List{}
				}
				bd.Set("frames", st)
				blocks.Items = append(blocks.Items, bd)
				if b.state == "active_allocated" {
					alloc += b.size
					req += b.req
				}
				if b.state != "inactive" {
					active += b.size
				}
			}
			segType := "large"
			if g.small {
				segType = "small"
			}
			sd := D("device", s.DeviceBase+d, "address", g.addr, "total_size", g.size, "allocated_size", alloc,
				"active_size", active, "requested_size", req, "stream", g.stream, "segment_type", segType,
				"segment_pool_id", Tuple{g.pool[0], g.pool[1]}, "is_expandable", s.Expandable)
			st := g.stack
			if st == nil {
				st = &List{}
			}
			sd.Set("frames", st)
			sd.Set("blocks", blocks)
			segs.Items = append(segs.Items, sd)
		}
	}
	traces := &List{}
	for d := 0; d <= s.DeviceBase+maxDev; d++ {
		l := &List{}
		if dv, ok := s.devs[d-s.DeviceBase]; ok {
			for _, e := range dv.trace {
				l.Items = append(l.Items, e)
			}
		}
		traces.Items = append(traces.Items, l)
	}
	out := D("segments", segs, "device_traces", traces)
	if s.Gen >= 'D' {
		var opts []string
		if s.Expandable {
			opts = append(opts, "expandable_segments:True")
		}
		maxSplit := int64(-1)
		if s.MaxSplitSize > 0 {
			maxSplit = s.MaxSplitSize
			opts = append(opts, fmt.Sprintf("max_split_size_mb:%d", s.MaxSplitSize>>20))
		}
		conf := strings.Join(opts, ",")
		out.Set("allocator_settings", D("PYTORCH_CUDA_ALLOC_CONF", conf, "max_split_size", maxSplit,
			"garbage_collection_threshold", 0.0, "expandable_segments", s.Expandable,
			"pinned_num_register_threads", 1, "release_lock_on_cudamalloc", false,
			"pinned_use_cuda_host_register", false, "roundup_power2_divisions", D("1", 0, "2", 0)))
	}
	if s.Gen >= 'E' {
		l := &List{}
		for _, a := range s.annots {
			l.Items = append(l.Items, a)
		}
		out.Set("external_annotations", l)
	}
	return out
}
