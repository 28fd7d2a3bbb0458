// Package jsonlex reads the JSON torchmem is given as it is written, not as
// the standard wants it: a Sanitizer replaces the raw control bytes Kineto
// leaves in strings and bounds what a decoder after it must hold, and
// ParseInt, ParseUint and Unquote read the numbers and strings writers put
// in either form (42, "42", "0x2a", 42.0).
package jsonlex

import (
	"fmt"
	"io"
	"sort"
	"sync"
)

// Sanitizer passes JSON text through, replacing raw control bytes
// (< 0x20) inside strings with spaces. Kineto writes names with fmt::print,
// not a JSON library, and real traces carry raw tabs and newlines in their
// names, which a strict decoder rejects. Replacing byte
// for byte keeps every byte offset of the input exact for error messages.
//
// It also bounds what the decoder after it must hold, on the raw text:
//   - nesting at maxDepth levels (NewSanitizer);
//   - one string at maxString bytes;
//   - a value nested deepBytesDepth levels deep (an event's args and their
//     values, read whole) at maxDeepBytes;
//   - a run of whitespace: once more than LongGap bytes pass without a
//     bracket or quote, runs of whitespace are cut to keepSpace bytes and a
//     number or literal may not pass MaxTokenBytes. The decoder keeps the
//     text since its last token, so 5 GiB of spaces would otherwise be
//     held whole. The cuts are recorded so that offsets stay exact
//     (RawOffset).
type Sanitizer struct {
	r         io.Reader
	inString  bool
	escape    bool
	depth     int
	maxDepth  int   // 0: no limit
	maxString int64 // 0: no limit
	n         int64 // bytes read from r
	replaced  int64 // control bytes replaced
	err       error // sticky limit error

	strLen    int64 // bytes of the string being read
	strStart  int64 // its offset
	gap       int64 // bytes since the last bracket or quote outside strings
	space     int64 // whitespace run in a long gap
	token     int64 // number or literal run in a long gap
	deepOpen  bool  // a value deepBytesDepth levels deep is open
	deepStart int64 // its offset

	mu   sync.Mutex
	out  int64    // bytes passed on
	cuts []cut    // where whitespace was cut, by output offset
	drop [][2]int // scratch: ranges of the current chunk to cut
}

// cut is a place where whitespace was removed: from output offset at on,
// raw offsets are larger by dropped bytes.
type cut struct{ at, dropped int64 }

// Bounds of the sanitiser (see Sanitizer).
const (
	LongGap        = 64 << 10
	keepSpace      = 4 << 10
	MaxTokenBytes  = 64 << 10
	deepBytesDepth = 4
	maxDeepBytes   = 4 << 20
)

// NewSanitizer bounds r: nesting at maxDepth levels and one string at
// maxString bytes (0: no limit).
func NewSanitizer(r io.Reader, maxDepth int, maxString int64) *Sanitizer {
	return &Sanitizer{r: r, maxDepth: maxDepth, maxString: maxString}
}

// Replaced is the number of control bytes replaced with spaces so far.
func (s *Sanitizer) Replaced() int64 { return s.replaced }

// LimitError is the error of JSON text past one of the sanitiser's bounds.
type LimitError struct {
	Msg    string
	Offset int64 // in the raw input
}

func (e *LimitError) Error() string { return e.Msg }

// sanOuter and sanInner mark the bytes the sanitiser must look at outside
// and inside strings; it skips the others in a tight loop.
var sanOuter, sanInner, sanSpace [256]bool

func init() {
	for _, c := range `"[]{}` {
		sanOuter[c] = true
	}
	sanInner['"'], sanInner['\\'] = true, true
	for c := 0; c < 0x20; c++ {
		sanInner[c] = true
	}
	for _, c := range " \t\r\n" {
		sanSpace[c] = true
	}
}

// failAt ends the chunk b being read at a bound passed at b[q]: the bytes
// before it are passed on, the error comes at the next Read. A value nested
// deepBytesDepth levels deep that passed its bound before q is the error
// instead. Where the text stops and which error follows depend only on the
// text, never on how the reads below cut it.
func (s *Sanitizer) failAt(b []byte, q int, off int64, msg string) (int, error) {
	if deepEnd := s.deepStart + maxDeepBytes; s.deepOpen && deepEnd < s.n+int64(q) {
		q = int(deepEnd - s.n)
		off, msg = s.deepStart, fmt.Sprintf("a JSON value nested %d levels deep longer than %d bytes", deepBytesDepth, maxDeepBytes)
	}
	s.err = &LimitError{Msg: msg, Offset: off}
	k := 0
	for _, d := range s.drop {
		if d[0] < q {
			s.drop[k] = [2]int{d[0], min(d[1], q)}
			k++
		}
	}
	s.drop = s.drop[:k]
	n := q
	if k > 0 {
		n = s.compact(b[:q])
	}
	s.n += int64(q)
	s.out += int64(n)
	if n == 0 {
		return 0, s.err
	}
	return n, nil
}

func (s *Sanitizer) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.r.Read(p)
	b := p[:n]
	inString, escape, depth := s.inString, s.escape, s.depth
	s.drop = s.drop[:0]
	for i := 0; i < len(b); i++ {
		if escape {
			escape = false
			if b[i] < 0x20 {
				b[i] = ' '
				s.replaced++
			}
			continue
		}
		if inString {
			start := i
			for i < len(b) && !sanInner[b[i]] {
				i++
			}
			before := s.strLen
			s.strLen += int64(i - start)
			if s.maxString > 0 && s.strLen > s.maxString {
				// At the byte that passed the bound (the run's first when a
				// backslash or control byte before it did).
				return s.failAt(b, start+int(max(s.maxString-before, 0)), s.strStart, fmt.Sprintf("a JSON string longer than %d bytes", s.maxString))
			}
			if i == len(b) {
				break
			}
			s.strLen++
			switch b[i] {
			case '"':
				inString, s.strLen = false, 0
			case '\\':
				escape = true
			default:
				b[i] = ' '
				s.replaced++
			}
			continue
		}
		start, before := i, s.gap
		for i < len(b) && !sanOuter[b[i]] {
			i++
		}
		if s.gap += int64(i - start); s.gap > LongGap {
			from := start // look from the gap's byte LongGap on
			if before < LongGap {
				from += int(LongGap - before)
			}
			if j := s.longGap(b, from, i); j >= 0 {
				return s.failAt(b, j, s.n+int64(j), fmt.Sprintf("a JSON number or literal longer than %d bytes", MaxTokenBytes))
			}
		}
		if i == len(b) {
			break
		}
		s.gap, s.space, s.token = 0, 0, 0
		switch b[i] {
		case '"':
			inString, s.strStart = true, s.n+int64(i)
		case '[', '{':
			depth++
			if s.maxDepth > 0 && depth > s.maxDepth {
				return s.failAt(b, i, s.n+int64(i), fmt.Sprintf("JSON nested deeper than %d levels", s.maxDepth))
			}
			if depth == deepBytesDepth {
				s.deepOpen, s.deepStart = true, s.n+int64(i)
			}
		default:
			if depth == deepBytesDepth {
				if s.n+int64(i) > s.deepStart+maxDeepBytes {
					return s.failAt(b, i, -1, "") // closed past its bound: the deep value's error
				}
				s.deepOpen = false
			}
			depth--
		}
	}
	if s.deepOpen && s.n+int64(n) > s.deepStart+maxDeepBytes {
		return s.failAt(b, n, -1, "") // still open past its bound
	}
	s.inString, s.escape, s.depth = inString, escape, depth
	s.n += int64(n)
	if len(s.drop) > 0 {
		n = s.compact(b)
	}
	s.out += int64(n)
	return n, err
}

// longGap looks at b[from:to], the part of a gap between brackets and quotes
// past LongGap bytes: whitespace runs longer than keepSpace are marked to be
// cut, and a number or literal may not pass MaxTokenBytes: it returns the
// index of the byte that passes it, or −1.
func (s *Sanitizer) longGap(b []byte, from, to int) int {
	for j := from; j < to; {
		c := b[j]
		switch {
		case sanSpace[c]:
			k := j + 1
			for k < to && sanSpace[b[k]] {
				k++
			}
			if keep := int(max(keepSpace-s.space, 0)); k-j > keep {
				cutFrom := j + keep
				if n := len(s.drop); n > 0 && s.drop[n-1][1] == cutFrom {
					s.drop[n-1][1] = k
				} else {
					s.drop = append(s.drop, [2]int{cutFrom, k})
				}
			}
			s.space += int64(k - j)
			s.token = 0
			j = k
			continue
		case c == ',' || c == ':':
			s.space, s.token = 0, 0
		default:
			s.space = 0
			if s.token++; s.token > MaxTokenBytes {
				return j
			}
		}
		j++
	}
	return -1
}

// compact removes the marked ranges from b, records the cuts and returns
// the bytes left.
func (s *Sanitizer) compact(b []byte) int {
	w, r := 0, 0
	s.mu.Lock()
	defer s.mu.Unlock()
	dropped := int64(0)
	if k := len(s.cuts); k > 0 {
		dropped = s.cuts[k-1].dropped
	}
	for _, d := range s.drop {
		w += copy(b[w:], b[r:d[0]])
		dropped += int64(d[1] - d[0])
		at := s.out + int64(w)
		if k := len(s.cuts); k > 0 && s.cuts[k-1].at == at {
			s.cuts[k-1].dropped = dropped
		} else {
			s.cuts = append(s.cuts, cut{at: at, dropped: dropped})
		}
		r = d[1]
	}
	w += copy(b[w:], b[r:])
	return w
}

// RawOffset maps an offset of the text passed on to the offset in the input.
func (s *Sanitizer) RawOffset(out int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.cuts), func(i int) bool { return s.cuts[i].at > out })
	if i == 0 {
		return out
	}
	return out + s.cuts[i-1].dropped
}

// Detach hands over the reader below, for a caller that reads and
// sanitises the text from the sanitiser's offset on by itself (the chrome
// trace reader's events) and gives it back with Resume. It fails once the
// sanitiser has cut whitespace or failed: offsets of the input and of the
// text passed on are then no longer the same.
func (s *Sanitizer) Detach() (io.Reader, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || len(s.cuts) > 0 {
		return nil, false
	}
	return s.r, true
}

// Resume takes back the reading after Detach: r is the input from offset
// off on, a place outside strings where depth containers are open, and the
// caller replaced replaced control bytes before it (counted in Replaced).
func (s *Sanitizer) Resume(r io.Reader, off int64, depth int, replaced int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r, s.n, s.out, s.depth = r, off, off, depth
	s.inString, s.escape, s.strLen, s.gap, s.space, s.token, s.deepOpen = false, false, 0, 0, 0, 0, false
	s.replaced += replaced
}

// Out is the number of bytes passed on so far.
func (s *Sanitizer) Out() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out
}
