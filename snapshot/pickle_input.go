package snapshot

import "io"

// inbuf is the decoder's input buffer: opcodes and their arguments are read
// with inline slice operations instead of a method call per byte.
type inbuf struct {
	src      io.Reader
	buf      []byte
	pos, end int
	err      error // sticky error from src (io.EOF at the end)
}

func newInbuf(r io.Reader) *inbuf { return &inbuf{src: r, buf: make([]byte, 1<<20)} }

// fill makes at least n bytes available (n ≤ len(buf)), and reports whether
// it could.
func (b *inbuf) fill(n int) bool {
	if b.end-b.pos >= n {
		return true
	}
	if b.pos > 0 {
		copy(b.buf, b.buf[b.pos:b.end])
		b.end -= b.pos
		b.pos = 0
	}
	for b.end < n && b.err == nil {
		k, err := b.src.Read(b.buf[b.end:])
		b.end += k
		if err != nil {
			b.err = err
		}
	}
	return b.end-b.pos >= n
}

// Read implements io.Reader over the buffer, then the source.
func (b *inbuf) Read(p []byte) (int, error) {
	if b.pos == b.end {
		if len(p) >= len(b.buf) && b.err == nil {
			return b.src.Read(p)
		}
		if !b.fill(1) {
			return 0, b.failure()
		}
	}
	n := copy(p, b.buf[b.pos:b.end])
	b.pos += n
	return n, nil
}

// failure is the error that ended the input (io.ErrUnexpectedEOF when none).
func (b *inbuf) failure() error {
	if b.err == nil || b.err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return b.err
}
