package pickle

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"unsafe"

	"github.com/torchmem/torchmem/internal/load/readahead"
	"github.com/torchmem/torchmem/snapshot"
)

// Read decodes a snapshot pickle with torchmem's streaming decoder.
// Bytes after STOP are ignored (trace_plot pads the pickle with NULs). size
// is the pickle's length when known (−1 otherwise): the trace is reserved
// from it (plist.addEvent).
func Read(in *bufio.Reader, src snapshot.Source, opts snapshot.Options, size int64) (snap *snapshot.Snapshot, err error) {
	return readPickleWith(in, src, opts, size, nil)
}

// ReadMapped decodes a snapshot pickle that is all in data, a file mapped
// into memory, without copying it: what Read does, less the read system
// calls' copy and the buffer's. A fault reading data (the file was
// truncated while mapped) is an error naming the file and the offset, not
// a crash. advance, when not nil, is called now and then with the bytes
// consumed so far (progress, and the caller's release of pages behind).
// A second decoder may read the trace's second half on another core
// (split.go); release, when not nil, is how it drops the pages of
// data[from:to] it has passed (from another goroutine than advance's).
func ReadMapped(data []byte, src snapshot.Source, opts snapshot.Options, advance func(consumed int), release func(from, to int)) (snap *snapshot.Snapshot, err error) {
	return readMappedWith(data, src, opts, advance, release, nil)
}

// readMappedWith is ReadMapped; tune is readPickleWith's.
func readMappedWith(data []byte, src snapshot.Source, opts snapshot.Options, advance func(consumed int), release func(from, to int), tune func(*vm)) (snap *snapshot.Snapshot, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return decode(newMappedInbuf(data, advance), src, opts, int64(len(data)), func(m *vm) {
		m.release = release
		if tune != nil {
			tune(m)
		}
	})
}

// faultOffset is the offset in data of the memory fault r, when r is one.
func faultOffset(r any, data []byte) (int64, bool) {
	re, ok := r.(runtime.Error)
	if !ok || len(data) == 0 {
		return 0, false
	}
	fa, ok := re.(interface{ Addr() uintptr })
	if !ok {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	if a := fa.Addr(); a >= base && a-base < uintptr(len(data)) {
		return int64(a - base), true
	}
	return 0, false
}

// readPickleWith is readPickle; tune, when not nil, sees the machine before
// it runs (tests turn its fast paths off and count what they took).
func readPickleWith(in *bufio.Reader, src snapshot.Source, opts snapshot.Options, size int64, tune func(*vm)) (snap *snapshot.Snapshot, err error) {
	ra := readahead.NewReader(in, nil)
	defer ra.Stop()
	return decode(newInbuf(ra), src, opts, size, tune)
}

// decode runs the machine on in. An internal panic is an error; a memory
// fault reading a mapped input names the offset it could not read.
func decode(in *inbuf, src snapshot.Source, opts snapshot.Options, size int64, tune func(*vm)) (snap *snapshot.Snapshot, err error) {
	defer func() {
		if r := recover(); r != nil {
			if off, ok := faultOffset(r, in.buf); ok && in.mapped {
				snap, err = nil, &snapshot.Error{Path: src.Path, Offset: off, Msg: "the file became shorter while it was read (truncated or rewritten by another program)"}
				return
			}
			snap, err = nil, &snapshot.Error{Path: src.Path, Offset: -1, Msg: fmt.Sprintf("internal error while decoding (please report): %v", r)}
			if os.Getenv("TORCHMEM_DEBUG") != "" {
				os.Stderr.Write(debug.Stack())
			}
		}
	}()
	b := snapshot.NewBuilder(src)
	sch := newSchema(b)
	sch.inputBytes = size
	opts = opts.WithDefaults()
	m := &vm{in: in, opts: opts, path: src.Path, sch: sch,
		stack: make([]value, 0, 4096), maxStack: maxStackValues(opts)}
	sch.m = m
	m.splitAt, m.splitTune = math.MaxInt, splitTune{after: splitAfter, minBytes: splitMinBytes, at: -1}
	if tune != nil {
		tune(m)
	}
	if in.mapped && (runtime.GOMAXPROCS(0) >= 2 || m.splitTune.force) {
		m.splitAt = m.splitTune.after
	}
	defer m.splitEnd() // a panic's too
	root, err := m.run()
	m.splitEnd()
	if err != nil {
		return nil, err
	}
	src.Bytes = m.off
	return sch.assemble(root, src, m.proto)
}
