package load

import (
	"errors"
	"os"

	"github.com/torchmem/torchmem/internal/load/pickle"
	"github.com/torchmem/torchmem/snapshot"
)

// releaseEvery is how far the decoder moves between releases of the mapped
// pages it has passed.
const releaseEvery = 4 << 20

// openMapped decodes f, a regular file of size bytes, mapped into memory
// when it is an uncompressed pickle within the input limit; ok is false when
// it is not (gzip, text, a file that cannot be mapped), and the caller reads
// it. The result and every error are those of Read.
func openMapped(f *os.File, path string, size int64, opts snapshot.Options) (s *snapshot.Snapshot, ok bool, err error) {
	memoAuto := opts.MaxMemo <= 0
	opts = opts.WithDefaults()
	if size > opts.MaxInputBytes {
		return nil, false, nil
	}
	data, ok := mapFile(f, size)
	if !ok {
		return nil, false, nil
	}
	defer unmapFile(data)
	switch data[0] {
	case 0x80, '}', ']', '(':
	default:
		return nil, false, nil
	}
	if memoAuto {
		opts.MaxMemo = autoMaxMemo(size, false)
	}
	progress, next, released := opts.Progress, 0, 0
	advance := func(consumed int) {
		if progress != nil && consumed >= next {
			progress(int64(consumed))
			next = consumed + 1<<20
		}
		if consumed-released >= releaseEvery {
			end := consumed &^ (releaseEvery - 1)
			releaseMapped(data[released:end])
			released = end
		}
	}
	// The second decoder's pages: whole pages between the two offsets.
	page := os.Getpagesize()
	release := func(from, to int) {
		from, to = (from+page-1)&^(page-1), to&^(page-1)
		if to > from {
			releaseMapped(data[from:to])
		}
	}
	src := snapshot.Source{Path: path, FileBytes: size}
	s, err = pickle.ReadMapped(data, src, opts, advance, release)
	if err == nil {
		err = snapshot.CheckSizes(s)
	}
	if err != nil {
		var e *snapshot.Error
		if errors.As(err, &e) {
			if e.Path == "" {
				e.Path = path
			}
			return nil, true, e
		}
		return nil, true, &snapshot.Error{Path: path, Offset: -1, Msg: err.Error()}
	}
	s.Source.FileBytes = size
	s.Source.Gzipped = false
	return s, true, nil
}
