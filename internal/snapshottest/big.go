package snapshottest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand"
)

// BigConfig shapes a large generated snapshot.
type BigConfig struct {
	TargetBytes int64 // approximate file size
	Seed        int64
	Frames      int // distinct frames shared by all stacks (real files: hundreds)
	Stacks      int // distinct stacks (real files: hundreds to thousands)
}

// WriteBig streams a protocol-4 snapshot of about TargetBytes to w, as
// CPython would pickle a long run recorded with
// _record_memory_history(max_entries=N): alloc / free_requested /
// free_completed entries with time_us and Python stacks whose frame dicts and
// frame lists are shared through the memo. Nothing is held in memory but the
// live set. It returns the number of trace entries written.
func WriteBig(w io.Writer, c BigConfig) (int, error) {
	if c.Frames == 0 {
		c.Frames = 600
	}
	if c.Stacks == 0 {
		c.Stacks = 400
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	p := &streamPickler{w: bw, strs: map[string]int{}}
	rng := rand.New(rand.NewSource(c.Seed))

	p.raw(0x80, 4)
	p.raw('}')
	p.memoize()
	p.raw('(')
	// segments: a few, with blocks for the allocations still live at the end
	// (written after the trace is known would need two passes; real dumps
	// list segments first, so we write a fixed state here).
	p.str("segments")
	p.raw(']')
	p.memoize()
	const segs = 64
	base := uint64(0x7f0000000000)
	p.raw('(')
	for i := 0; i < segs; i++ {
		addr := base + uint64(i)*(40<<20)
		p.raw('}')
		p.memoize()
		p.raw('(')
		p.kv("device", 0)
		p.kv("address", int64(addr))
		p.kv("total_size", 20<<20)
		p.kv("allocated_size", 8<<20)
		p.kv("active_size", 8<<20)
		p.kv("requested_size", 8<<20)
		p.kv("stream", 0)
		p.str("segment_type")
		p.str("large")
		p.str("segment_pool_id")
		p.int(0)
		p.int(0)
		p.raw(0x86)
		p.memoize()
		p.kv("is_expandable", false)
		p.str("frames")
		p.raw(']')
		p.memoize()
		p.str("blocks")
		p.raw(']')
		p.memoize()
		p.raw('(')
		for j, st := range []string{"active_allocated", "inactive"} {
			p.raw('}')
			p.memoize()
			p.raw('(')
			p.kv("address", int64(addr)+int64(j)*(8<<20))
			size := int64(8 << 20)
			if j == 1 {
				size = 12 << 20
			}
			p.kv("size", size)
			p.kv("requested_size", size)
			p.str("state")
			p.str(st)
			p.str("frames")
			p.raw(']')
			p.memoize()
			p.raw('u')
		}
		p.raw('e')
		p.raw('u')
	}
	p.raw('e')

	// The trace: one device, entries in batches of 1000 as CPython batches APPENDS.
	p.str("device_traces")
	p.raw(']')
	p.memoize()
	p.raw(']')
	p.memoize()
	frameMemo := make([]int, c.Frames)
	for i := range frameMemo {
		frameMemo[i] = -1
	}
	stackFrames := make([][]int, c.Stacks)
	for i := range stackFrames {
		n := 10 + rng.Intn(30)
		for j := 0; j < n; j++ {
			stackFrames[i] = append(stackFrames[i], rng.Intn(c.Frames))
		}
	}
	type liveBlock struct {
		addr  uint64
		size  int64
		stack int
	}
	var live []liveBlock
	next := uint64(0x7f8000000000)
	timeUS := int64(1_754_000_000_000_000)
	entries, inBatch := 0, 0
	writeEntry := func(action string, addr uint64, size int64, stack int) {
		if inBatch == 0 {
			p.raw('(')
		}
		p.raw('}')
		p.memoize()
		p.raw('(')
		p.str("action")
		p.str(action)
		p.kv("addr", int64(addr))
		p.kv("size", size)
		p.kv("stream", 0)
		p.kv("time_us", timeUS)
		// A fresh frames list per entry (PyTorch builds one per traceback),
		// whose frame dicts are shared through the memo.
		p.str("frames")
		p.raw(']')
		p.memoize()
		p.raw('(')
		for _, f := range stackFrames[stack] {
			if frameMemo[f] >= 0 {
				p.get(frameMemo[f])
				continue
			}
			p.raw('}')
			frameMemo[f] = p.memoize()
			p.raw('(')
			p.str("filename")
			p.str(fmt.Sprintf("/home/user/project/src/module_%d.py", f%97))
			p.kv("line", int64(10+f*7%900))
			p.str("name")
			p.str(fmt.Sprintf("function_%d", f))
			p.raw('u')
		}
		p.raw('e')
		p.str("compile_context")
		p.str("N/A")
		p.str("user_metadata")
		p.str("")
		p.raw('u')
		timeUS += int64(1 + rng.Intn(50))
		entries++
		inBatch++
		if inBatch == 1000 {
			p.raw('e')
			inBatch = 0
		}
	}
	for p.n < c.TargetBytes {
		if len(live) > 0 && (len(live) > 2000 || rng.Intn(2) == 0) {
			i := rng.Intn(len(live))
			b := live[i]
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			writeEntry("free_requested", b.addr, b.size, b.stack)
			writeEntry("free_completed", b.addr, b.size, b.stack)
			continue
		}
		size := int64(512 * (1 + rng.Intn(1<<13)))
		b := liveBlock{addr: next, size: size, stack: rng.Intn(c.Stacks)}
		next += uint64(size+511) / 512 * 512
		live = append(live, b)
		writeEntry("alloc", b.addr, b.size, b.stack)
	}
	// End between steps: free what the trace allocated, so the trace agrees
	// with the dump-time segments (whose blocks predate the recording).
	for _, b := range live {
		writeEntry("free_requested", b.addr, b.size, b.stack)
		writeEntry("free_completed", b.addr, b.size, b.stack)
	}
	if inBatch > 0 {
		p.raw('e')
	}
	p.raw('a') // the device's list into device_traces
	p.raw('u') // SETITEMS of the top-level dict
	p.raw('.')
	if p.err != nil {
		return entries, p.err
	}
	return entries, bw.Flush()
}

// streamPickler writes opcodes straight to a writer, numbering the memo.
type streamPickler struct {
	w    *bufio.Writer
	n    int64
	memo int
	strs map[string]int
	err  error
	tmp  [9]byte
}

func (p *streamPickler) raw(b ...byte) {
	if p.err == nil {
		_, p.err = p.w.Write(b)
		p.n += int64(len(b))
	}
}

func (p *streamPickler) memoize() int {
	p.raw(0x94)
	p.memo++
	return p.memo - 1
}

func (p *streamPickler) get(idx int) {
	if idx < 256 {
		p.raw('h', byte(idx))
		return
	}
	binary.LittleEndian.PutUint32(p.tmp[:4], uint32(idx))
	p.raw('j', p.tmp[0], p.tmp[1], p.tmp[2], p.tmp[3])
}

func (p *streamPickler) str(s string) {
	if idx, ok := p.strs[s]; ok {
		p.get(idx)
		return
	}
	p.raw(0x8c, byte(len(s)))
	p.raw([]byte(s)...)
	p.strs[s] = p.memoize()
}

func (p *streamPickler) int(v int64) {
	switch {
	case v >= 0 && v < 256:
		p.raw('K', byte(v))
	case v >= 0 && v < 65536:
		p.raw('M', byte(v), byte(v>>8))
	case v >= -1<<31 && v < 1<<31:
		binary.LittleEndian.PutUint32(p.tmp[:4], uint32(int32(v)))
		p.raw('J', p.tmp[0], p.tmp[1], p.tmp[2], p.tmp[3])
	default:
		binary.LittleEndian.PutUint64(p.tmp[:8], uint64(v))
		n := 8
		for n > 1 && ((p.tmp[n-1] == 0 && p.tmp[n-2]&0x80 == 0) || (p.tmp[n-1] == 0xff && p.tmp[n-2]&0x80 != 0)) {
			n--
		}
		p.raw(0x8a, byte(n))
		p.raw(p.tmp[:n]...)
	}
}

func (p *streamPickler) kv(k string, v any) {
	p.str(k)
	switch x := v.(type) {
	case int:
		p.int(int64(x))
	case int64:
		p.int(x)
	case bool:
		if x {
			p.raw(0x88)
		} else {
			p.raw(0x89)
		}
	}
}
