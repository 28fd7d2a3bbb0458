package pickle

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/snapshot"
)

// inbuf is the decoder's input buffer: opcodes and their arguments are read
// with inline slice operations instead of a method call per byte.
type inbuf struct {
	src      io.Reader
	buf      []byte
	pos, end int
	err      error // sticky error from src (io.EOF at the end)
	// mapped is set when buf is the whole input, read-only (a mapped file):
	// fill moves end forward by a window instead of copying, and calls
	// advance with pos.
	mapped  bool
	advance func(pos int)
}

// inbufWindow is the buffer's size, and in a mapped input the most fill
// makes available past pos: the fast paths see the same windows either way.
const inbufWindow = 256 << 10

func newInbuf(r io.Reader) *inbuf { return &inbuf{src: r, buf: make([]byte, inbufWindow)} }

// newMappedInbuf reads data in place. advance, when not nil, is called
// with the decoder's position each time the window moves.
func newMappedInbuf(data []byte, advance func(pos int)) *inbuf {
	return &inbuf{buf: data, mapped: true, advance: advance}
}

// fill makes at least n bytes available (n ≤ inbufWindow), and reports
// whether it could.
func (b *inbuf) fill(n int) bool {
	if b.end-b.pos >= n {
		return true
	}
	if b.mapped {
		b.end = min(len(b.buf), b.pos+max(n, inbufWindow))
		if b.end == len(b.buf) {
			b.err = io.EOF
		}
		if b.advance != nil {
			b.advance(b.pos)
		}
		return b.end-b.pos >= n
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
		if !b.mapped && len(p) >= len(b.buf) && b.err == nil {
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

func (m *vm) readN(n int64, what string) ([]byte, error) {
	if n < 0 {
		return nil, m.fail("negative length %d in %s", n, what)
	}
	if n <= int64(cap(m.buf)) || n <= 1<<16 {
		if int64(cap(m.buf)) < n {
			m.buf = make([]byte, n)
		}
		b := m.buf[:n]
		k, err := io.ReadFull(m.in, b)
		m.off += int64(k)
		if err != nil {
			return nil, m.readErr(err, what)
		}
		return b, nil
	}
	// Large claims are read in chunks so that a short file cannot make us
	// reserve the claimed size up front.
	var out []byte
	for rem := n; rem > 0; {
		c := min(rem, 1<<20)
		start := len(out)
		out = slices.Grow(out, int(c))[:start+int(c)]
		k, err := io.ReadFull(m.in, out[start:])
		m.off += int64(k)
		if err != nil {
			return nil, m.readErr(err, what)
		}
		rem -= c
	}
	return out, nil
}

func (m *vm) readErr(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return m.truncated(what)
	}
	if errors.Is(err, snapshot.ErrInputTooLarge) {
		return err
	}
	return &snapshot.Error{Path: m.path, Offset: m.off, Msg: "read error: " + err.Error()}
}

func (m *vm) readLine(what string) (string, error) {
	for {
		in := m.in
		for i := in.pos; i < in.end; i++ {
			if in.buf[i] == '\n' {
				line := string(in.buf[in.pos:i])
				m.off += int64(i + 1 - in.pos)
				in.pos = i + 1
				return line, nil
			}
		}
		if in.end-in.pos >= inbufWindow {
			return "", m.fail("%s argument longer than %d bytes", what, inbufWindow)
		}
		if !in.fill(in.end - in.pos + 1) {
			m.off += int64(in.end - in.pos)
			in.pos = in.end
			return "", m.readErr(in.failure(), what)
		}
	}
}

func (m *vm) uint(n int, what string) (uint64, error) {
	in := m.in
	if in.end-in.pos < n && !in.fill(n) {
		m.off += int64(in.end - in.pos)
		in.pos = in.end
		return 0, m.readErr(in.failure(), what)
	}
	b := in.buf[in.pos : in.pos+n]
	in.pos += n
	m.off += int64(n)
	switch n {
	case 1:
		return uint64(b[0]), nil
	case 2:
		return uint64(binary.LittleEndian.Uint16(b)), nil
	case 4:
		return uint64(binary.LittleEndian.Uint32(b)), nil
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (m *vm) str(n uint64, what string) (string, error) {
	if int64(n) > m.opts.MaxStringBytes || n > math.MaxInt64 {
		return "", m.fail("%s claims a string of %d bytes, over the limit of %d", what, n, m.opts.MaxStringBytes)
	}
	b, err := m.readN(int64(n), what)
	if err != nil {
		return "", err
	}
	if len(b) <= memoShortString {
		return m.internShort(b), nil
	}
	return string(b), nil
}

// internShort returns the text of b (at most memoShortString bytes), one
// string for each text: the memo's texts, which its slots point at.
func (m *vm) internShort(b []byte) string { return m.memo.texts.intern(b) }

func bswap(v uint64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return binary.BigEndian.Uint64(b[:])
}

// textNumber handles the protocol 0 INT, LONG and FLOAT opcodes.
func (m *vm) textNumber(op byte) error {
	line, err := m.readLine(OpName(op))
	if err != nil {
		return err
	}
	switch op {
	case 'F':
		f, err := strconv.ParseFloat(line, 64)
		if err != nil {
			return m.fail("FLOAT with a bad value %q", units.ClipBytes(line, 40))
		}
		m.push(value{k: kFloat, n: int64(math.Float64bits(f))})
		return nil
	case 'I':
		if line == "00" || line == "01" {
			m.push(value{k: kBool, n: int64(line[1] - '0')})
			return nil
		}
	}
	line = strings.TrimSuffix(line, "L")
	if len(line) > maxLongBytes*3 {
		return m.fail("%s integer of %d digits", OpName(op), len(line))
	}
	x, ok := new(big.Int).SetString(line, 10)
	if !ok {
		return m.fail("%s with a bad value %q", OpName(op), units.ClipBytes(line, 40))
	}
	switch {
	case x.IsInt64():
		m.push(value{k: kInt, n: x.Int64()})
	case x.Sign() > 0 && x.IsUint64():
		m.push(value{k: kUint, n: int64(x.Uint64())})
	default:
		m.push(value{k: kBig, p: unsafe.Pointer(x)})
	}
	return nil
}

// pyQuoteToGo turns a Python repr of a byte string ('…' or "…") into a Go
// quoted string for strconv.Unquote.
func pyQuoteToGo(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		inner := strings.ReplaceAll(s[1:len(s)-1], `\'`, `'`)
		return `"` + strings.ReplaceAll(inner, `"`, `\"`) + `"`
	}
	return s
}

// memoIndex reads the memo index argument of a PUT or GET opcode: one byte
// (BINPUT), four (LONG_BINPUT, LONG_BINGET) or a decimal line (PUT, GET).
func (m *vm) memoIndex(op byte) (uint64, error) {
	switch op {
	case 'q':
		return m.uint(1, "BINPUT")
	case 'r', 'j':
		return m.uint(4, OpName(op))
	}
	line, err := m.readLine(OpName(op))
	if err != nil {
		return 0, err
	}
	idx, err := strconv.ParseUint(line, 10, 31)
	if err != nil {
		return 0, m.fail("%s with a bad index %q", OpName(op), units.ClipBytes(line, 40))
	}
	return idx, nil
}
