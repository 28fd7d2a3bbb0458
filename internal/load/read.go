package load

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/torchmem/torchmem/internal/load/kineto"
	"github.com/torchmem/torchmem/internal/load/pickle"
	"github.com/torchmem/torchmem/internal/load/traceplot"
	"github.com/torchmem/torchmem/snapshot"
)

// Open reads a snapshot or chrome trace from a file; "-" reads standard input.
func Open(path string, opts snapshot.Options) (*snapshot.Snapshot, error) {
	if path == "-" {
		return Read(os.Stdin, "-", -1, opts)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &snapshot.Error{Path: path, Offset: -1, Msg: cleanOSError(err)}
	}
	defer f.Close()
	size := int64(-1)
	if st, err := f.Stat(); err == nil {
		if st.IsDir() {
			return nil, &snapshot.Error{Path: path, Offset: -1, Msg: "is a directory, not a snapshot or trace"}
		}
		size = st.Size()
		if st.Mode().IsRegular() {
			if s, ok, err := openMapped(f, path, size, opts); ok {
				return s, err
			}
		}
	}
	return Read(f, path, size, opts)
}

func cleanOSError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// countingReader counts bytes read and reports progress.
type countingReader struct {
	r        io.Reader
	n        int64
	progress func(int64)
	next     int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.progress != nil && c.n >= c.next {
		c.progress(c.n)
		c.next = c.n + 1<<20
	}
	return n, err
}

// The most a gzip input may expand to when MaxInputBytes is left to its
// default: a base, plus a ratio times its compressed size (the file's, or
// what was read so far of standard input). Real files expand 7–30×
// (the shared snapshots and traces); deflate allows about 1,032×, so a
// 9 MB gzip could make the reader decode 8 GiB and spend over a minute
// of CPU doing it. Past the bound the error names --max-input-bytes.
const (
	gzipExpansionBase  = 64 << 20
	gzipExpansionRatio = 128
)

// limitReader fails with errTooLarge once more than max bytes were read,
// or, when ratio is set, more than gzipExpansionBase plus ratio times the
// compressed bytes (the larger of size and what compressed counted).
type limitReader struct {
	r   io.Reader
	n   int64
	max int64
	// ratio bounds a gzip input's expansion (0: none); over records that
	// it did.
	ratio      int64
	size       int64
	compressed *countingReader
	over       bool
}

// bound is the most bytes the reader may give now.
func (l *limitReader) bound() int64 {
	if l.ratio == 0 {
		return l.max
	}
	return min(l.max, gzipExpansionBase+l.ratio*max(l.size, l.compressed.n))
}

func (l *limitReader) Read(p []byte) (int, error) {
	limit := l.bound()
	if l.n > limit {
		l.over = l.ratio > 0 && limit < l.max
		return 0, snapshot.ErrInputTooLarge
	}
	if rem := limit + 1 - l.n; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := l.r.Read(p)
	l.n += int64(n)
	if limit = l.bound(); l.n > limit {
		l.over = l.ratio > 0 && limit < l.max
		return n, snapshot.ErrInputTooLarge
	}
	return n, err
}

// Read sniffs the format of r by its first bytes (never by the file name) and
// decodes it. size is the file size when known, −1 otherwise.
func Read(r io.Reader, path string, size int64, opts snapshot.Options) (*snapshot.Snapshot, error) {
	// A limit left at zero follows the input: the memo its size, a gzip
	// input's expansion its compressed size.
	memoAuto, inputAuto := opts.MaxMemo <= 0, opts.MaxInputBytes <= 0
	opts = opts.WithDefaults()
	cr := &countingReader{r: r, progress: opts.Progress}
	src := snapshot.Source{Path: path, FileBytes: size}
	br := bufio.NewReaderSize(cr, 256<<10)
	head, _ := br.Peek(2)
	if len(head) == 0 {
		return nil, &snapshot.Error{Path: path, Offset: 0, Msg: "empty file"}
	}
	var in *bufio.Reader = br
	var lim *limitReader
	if len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &snapshot.Error{Path: path, Offset: 0, Msg: "bad gzip header: " + err.Error()}
		}
		zr.Multistream(true)
		src.Gzipped = true
		lim = &limitReader{r: paddedGzip{zr}, max: opts.MaxInputBytes, size: size, compressed: cr}
		if inputAuto {
			lim.ratio = gzipExpansionRatio
		}
		in = bufio.NewReaderSize(lim, 256<<10)
	} else {
		lim = &limitReader{r: br, max: opts.MaxInputBytes}
		in = bufio.NewReaderSize(lim, 256<<10)
	}
	if memoAuto {
		opts.MaxMemo = autoMaxMemo(size, src.Gzipped)
	}
	s, err := readSniffed(in, src, opts)
	if err == nil && src.Gzipped {
		err = gzipEnd(in, path)
	}
	if err == nil {
		err = snapshot.CheckSizes(s)
	}
	if src.FileBytes < 0 {
		src.FileBytes = cr.n
	}
	if err != nil {
		if lim.over {
			return nil, &snapshot.Error{Path: path, Offset: -1, Msg: fmt.Sprintf("gzip input expands past %d bytes, %d times its %d compressed bytes and %d MiB more: more than files PyTorch writes expand (raise the limit with --max-input-bytes)",
				lim.bound(), gzipExpansionRatio, max(lim.size, cr.n), gzipExpansionBase>>20)}
		}
		if errors.Is(err, snapshot.ErrInputTooLarge) || (lim != nil && lim.n > lim.max) {
			what := "input"
			if src.Gzipped {
				what = "gzip input expands"
			}
			return nil, &snapshot.Error{Path: path, Offset: -1, Msg: fmt.Sprintf("%s past the limit of %d bytes (raise it with --max-input-bytes)", what, opts.MaxInputBytes)}
		}
		var e *snapshot.Error
		if errors.As(err, &e) {
			if e.Path == "" {
				e.Path = path
			}
			if src.Gzipped && e.Offset >= 0 && !strings.Contains(e.Msg, "decompressed") {
				e.Msg += " (of the decompressed data)"
			}
			return nil, e
		}
		return nil, &snapshot.Error{Path: path, Offset: -1, Msg: err.Error()}
	}
	s.Source.FileBytes = src.FileBytes
	if s.Source.FileBytes < 0 {
		s.Source.FileBytes = cr.n
	}
	s.Source.Gzipped = src.Gzipped
	return s, nil
}

// autoMaxMemo is the memo's bound when left to follow the input: a memo
// entry for every 40 bytes of the file (4 of a gzip file).
func autoMaxMemo(size int64, gzipped bool) int {
	per := int64(40)
	if gzipped {
		per = 4
	}
	if size < 0 { // stdin: the size is unknown; allow a 2.4 GB snapshot
		size = 32 << 20 * per
	}
	return int(min(max(int64(snapshot.DefaultMaxMemo), size/per), 1<<31-1))
}

func readSniffed(in *bufio.Reader, src snapshot.Source, opts snapshot.Options) (*snapshot.Snapshot, error) {
	head, _ := in.Peek(64)
	if len(head) == 0 {
		return nil, &snapshot.Error{Path: src.Path, Offset: 0, Msg: "empty after decompression"}
	}
	size := src.FileBytes // the pickle's, unless gzip expands it
	if src.Gzipped {
		size = -1
	}
	switch {
	case head[0] == 0x80:
		return pickle.Read(in, src, opts, size)
	case head[0] == '}' || head[0] == ']' || head[0] == '(':
		// Protocol 0/1 pickles have no PROTO opcode.
		return pickle.Read(in, src, opts, size)
	}
	// Text: leading whitespace (any amount: it is skipped, not kept) and a
	// UTF-8 byte-order mark.
	lead, err := skipLeadingSpace(in)
	if err != nil {
		return nil, err
	}
	next, _ := in.Peek(1)
	switch {
	case len(next) == 0:
	case next[0] == '<':
		return traceplot.Read(in, src, opts, lead)
	case next[0] == '{' || next[0] == '[':
		return kineto.Read(in, src, opts, lead)
	}
	return nil, &snapshot.Error{Path: src.Path, Offset: 0, Msg: fmt.Sprintf("not a PyTorch memory snapshot, trace_plot HTML or chrome trace (starts with % x)", head[:min(len(head), 4)])}
}

// skipLeadingSpace discards a UTF-8 byte-order mark and whitespace at the
// start of a text input and returns how many bytes it discarded.
func skipLeadingSpace(in *bufio.Reader) (int64, error) {
	var n int64
	if b, _ := in.Peek(3); bytes.HasPrefix(b, []byte("\xef\xbb\xbf")) {
		in.Discard(3)
		n = 3
	}
	for {
		if _, err := in.Peek(1); err != nil { // fills the buffer
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
		buf, _ := in.Peek(in.Buffered())
		k := 0
		for k < len(buf) && (buf[k] == ' ' || buf[k] == '\t' || buf[k] == '\r' || buf[k] == '\n') {
			k++
		}
		if k == 0 {
			return n, nil
		}
		in.Discard(k)
		n += int64(k)
	}
}

// gzipEnd reads a gzip input to its end once the reader has what it needs,
// so that the checksum and length in the gzip trailer are checked: a
// pickle's reader stops at its STOP opcode, before them, and read a
// corrupt file as good. The rest counts against MaxInputBytes like the
// data before it.
func gzipEnd(in *bufio.Reader, path string) error {
	_, err := io.Copy(io.Discard, in)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gzip.ErrChecksum):
		return &snapshot.Error{Path: path, Offset: -1, Msg: "the gzip checksum or length does not match the data: the file is corrupt"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &snapshot.Error{Path: path, Offset: -1, Msg: "the gzip data end early, before the gzip trailer: the file is truncated"}
	}
	return err
}

// paddedGzip ends a gzip stream at bytes that are not a gzip member after
// the last one (zero padding, as tape and some uploaders add), as gzip(1)
// does: the members before them were read and checked whole. The first
// member's header was read when the reader was made, so a bad header met
// while reading is always one after a complete member.
type paddedGzip struct{ zr *gzip.Reader }

func (p paddedGzip) Read(b []byte) (int, error) {
	n, err := p.zr.Read(b)
	if errors.Is(err, gzip.ErrHeader) {
		err = io.EOF
	}
	return n, err
}
