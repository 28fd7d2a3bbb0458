package traceplot

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"io"

	"github.com/torchmem/torchmem/internal/load/pickle"
	"github.com/torchmem/torchmem/snapshot"
)

// This file reads the HTML pages of python -m torch.cuda._memory_viz
// (trace_plot, segment_plot) as a stream: the page is never held whole. Two
// generations exist:
//
//   - since 2023, the pickle is embedded base64-encoded, as
//     `const local_files = [{"name": "snapshot.pickle", "base64": "gASV…"}]`;
//     it is decoded as it is read and handed to the pickle reader;
//   - in 2022–23 trace_plot embedded its own JSON, `let alloc_data = {…}`
//     (allocdata.go); segment_plot pages of that time embedded
//     `let trace_data = {…}`, which is not read.

// Markers of the data a _memory_viz page embeds.
var (
	markBase64    = []byte(`"base64":`)
	markAllocData = []byte(`alloc_data =`)
	markTraceData = []byte(`trace_data =`)
	pageMarkers   = [][]byte{markBase64, markAllocData, markTraceData}
)

// Read finds the first data a _memory_viz page embeds and reads
// it. lead is the number of input bytes already consumed (leading
// whitespace).
func Read(in *bufio.Reader, src snapshot.Source, opts snapshot.Options, lead int64) (*snapshot.Snapshot, error) {
	which, off, err := findMarker(in, pageMarkers)
	if err != nil {
		return nil, err
	}
	off += lead
	src.Format = snapshot.FormatTracePlotHTML
	switch which {
	case 0:
		return readBase64Pickle(in, src, opts, off)
	case 1:
		return readAllocData(in, src, opts, off)
	case 2:
		return nil, &snapshot.Error{Path: src.Path, Offset: off, Msg: "a segment_plot page of 2022–23 (trace_data JSON): not read; open the snapshot pickle it was made from"}
	}
	return nil, &snapshot.Error{Path: src.Path, Offset: 0, Msg: `HTML without an embedded snapshot (no "base64" field of a _memory_viz trace_plot page, no alloc_data of an older one)`}
}

// findMarker reads in up to the end of the first of markers and returns
// its index (−1 when none occurs) and the offset after it. It holds one
// buffer of the page at a time.
func findMarker(in *bufio.Reader, markers [][]byte) (int, int64, error) {
	longest := 0
	for _, m := range markers {
		longest = max(longest, len(m))
	}
	var off int64
	for {
		buf, err := in.Peek(in.Size())
		best, at := -1, len(buf)
		for i, m := range markers {
			if j := bytes.Index(buf, m); j >= 0 && j < at {
				best, at = i, j
			}
		}
		if best >= 0 {
			n := at + len(markers[best])
			in.Discard(n)
			return best, off + int64(n), nil
		}
		if err != nil {
			if err == io.EOF || errors.Is(err, bufio.ErrBufferFull) && len(buf) == 0 {
				return -1, off, nil
			}
			if err != bufio.ErrBufferFull {
				return -1, off, err
			}
		}
		keep := longest - 1 // a marker may straddle the next read
		n := max(len(buf)-keep, 1)
		in.Discard(n)
		off += int64(n)
	}
}

// readBase64Pickle decodes the base64 string that follows the marker (at
// input offset off) while the pickle reader reads it.
func readBase64Pickle(in *bufio.Reader, src snapshot.Source, opts snapshot.Options, off int64) (*snapshot.Snapshot, error) {
	for {
		b, err := in.Peek(1)
		if err != nil || (b[0] != ' ' && b[0] != '\t') {
			break
		}
		in.Discard(1)
		off++
	}
	if b, err := in.Peek(1); err != nil || b[0] != '"' {
		return nil, &snapshot.Error{Path: src.Path, Offset: off, Msg: `"base64" field is not a string`}
	}
	in.Discard(1)
	off++
	q := &quotedReader{r: in}
	dec := &base64Reader{r: q, corrupt: -1}
	s, err := pickle.Read(bufio.NewReaderSize(dec, 64<<10), src, opts, -1)
	switch {
	case dec.corrupt >= 0:
		return nil, &snapshot.Error{Path: src.Path, Offset: off + dec.corrupt, Msg: "bad base64 in the embedded snapshot"}
	case q.unterminated:
		return nil, &snapshot.Error{Path: src.Path, Offset: off, Msg: "unterminated base64 string"}
	case err != nil:
		var e *snapshot.Error
		if errors.As(err, &e) && e.Offset >= 0 {
			e.Msg += " (of the pickle embedded in the HTML)"
		}
		return nil, err
	}
	s.Source.Format = snapshot.FormatTracePlotHTML
	return s, nil
}

// quotedReader reads the rest of a JSON string whose opening quote was
// consumed: its bytes up to the closing quote, then io.EOF. A page that
// ends first is an unterminated string.
type quotedReader struct {
	r            *bufio.Reader
	done         bool
	unterminated bool
}

func (q *quotedReader) Read(p []byte) (int, error) {
	if q.done {
		return 0, io.EOF
	}
	buf, err := q.r.Peek(max(min(len(p), q.r.Size()), 1))
	if i := bytes.IndexByte(buf, '"'); i >= 0 {
		n := copy(p, buf[:i])
		q.r.Discard(n)
		if n == i {
			q.done = true
		}
		return n, nil
	}
	n := copy(p, buf)
	q.r.Discard(n)
	if err != nil && err != bufio.ErrBufferFull {
		if err == io.EOF {
			q.unterminated = true
			err = io.ErrUnexpectedEOF
		}
		return n, err
	}
	return n, nil
}

// base64Reader decodes base64 text as it is read, a few KiB at a time,
// and remembers where the text went bad (corrupt, −1 while good).
type base64Reader struct {
	r       io.Reader
	in      [4096]byte
	nin     int   // encoded bytes pending in in
	pos     int64 // offset of in[0] in the encoded text
	out     []byte
	buf     [3072]byte
	eof     bool
	corrupt int64
}

func (b *base64Reader) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.eof && b.nin == 0 {
			return 0, io.EOF
		}
		for !b.eof && b.nin < len(b.in) {
			k, err := b.r.Read(b.in[b.nin:])
			b.nin += k
			if err == io.EOF {
				b.eof = true
			} else if err != nil {
				return 0, err
			}
		}
		k := b.nin
		if !b.eof {
			k -= k % 4
		}
		n, err := base64.StdEncoding.Decode(b.buf[:], b.in[:k])
		var ce base64.CorruptInputError
		if errors.As(err, &ce) {
			b.corrupt = b.pos + int64(ce)
			return 0, err
		}
		b.out = b.buf[:n]
		b.nin = copy(b.in[:], b.in[k:b.nin])
		b.pos += int64(k)
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}
