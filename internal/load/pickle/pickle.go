package pickle

import (
	"bufio"
	"fmt"
	"os"
	"runtime/debug"

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

// readPickleWith is readPickle; tune, when not nil, sees the machine before
// it runs (tests turn its fast paths off and count what they took).
func readPickleWith(in *bufio.Reader, src snapshot.Source, opts snapshot.Options, size int64, tune func(*vm)) (snap *snapshot.Snapshot, err error) {
	defer func() {
		if r := recover(); r != nil {
			snap, err = nil, &snapshot.Error{Path: src.Path, Offset: -1, Msg: fmt.Sprintf("internal error while decoding (please report): %v", r)}
			if os.Getenv("TORCHMEM_DEBUG") != "" {
				os.Stderr.Write(debug.Stack())
			}
		}
	}()
	ra := readahead.NewReader(in, nil)
	defer ra.Stop()
	b := snapshot.NewBuilder(src)
	sch := newSchema(b)
	sch.inputBytes = size
	opts = opts.WithDefaults()
	m := &vm{in: newInbuf(ra), opts: opts, path: src.Path, sch: sch,
		stack: make([]value, 0, 4096), maxStack: maxStackValues(opts)}
	sch.m = m
	if tune != nil {
		tune(m)
	}
	root, err := m.run()
	if err != nil {
		return nil, err
	}
	src.Bytes = m.off
	return sch.assemble(root, src, m.proto)
}
