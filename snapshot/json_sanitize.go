package snapshot

import (
	"fmt"
	"io"
	"sort"
	"sync"
)

// ctrlSanitizer passes JSON text through, replacing raw control bytes
// (< 0x20) inside strings with spaces. Kineto writes names with fmt::print,
// not a JSON library, and real traces carry raw tabs and newlines in their
// names, which a strict decoder rejects. Replacing byte
// for byte keeps every byte offset of the input exact for error messages.
//
// It also bounds what the decoder after it must hold, on the raw text:
//   - nesting at Options.MaxDepth levels;
//   - one string at Options.MaxStringBytes;
//   - a value nested deepBytesDepth levels deep (an event's args and their
//     values, read whole) at maxDeepBytes;
//   - a run of whitespace: once more than longGap bytes pass without a
//     bracket or quote, runs of whitespace are cut to keepSpace bytes and a
//     number or literal may not pass maxTokenBytes. The decoder keeps the
//     text since its last token, so 5 GiB of spaces would otherwise be
//     held whole. The cuts are recorded so that offsets stay exact
//     (rawOffset).
type ctrlSanitizer struct {
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

// Bounds of the sanitiser (see ctrlSanitizer).
const (
	longGap        = 64 << 10
	keepSpace      = 4 << 10
	maxTokenBytes  = 64 << 10
	deepBytesDepth = 4
	maxDeepBytes   = 4 << 20
)

// newSanitizer bounds r with opts' limits.
func newSanitizer(r io.Reader, opts Options) *ctrlSanitizer {
	return &ctrlSanitizer{r: r, maxDepth: opts.MaxDepth, maxString: opts.MaxStringBytes}
}

// errLimit is the error of JSON text past one of the sanitiser's bounds.
type errLimit struct {
	msg    string
	offset int64 // in the raw input
}

func (e *errLimit) Error() string { return e.msg }

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

func (s *ctrlSanitizer) fail(off int64, format string, args ...any) (int, error) {
	s.err = &errLimit{msg: fmt.Sprintf(format, args...), offset: off}
	return 0, s.err
}

func (s *ctrlSanitizer) Read(p []byte) (int, error) {
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
			s.strLen += int64(i - start)
			if s.maxString > 0 && s.strLen > s.maxString {
				return s.fail(s.strStart, "a JSON string longer than %d bytes", s.maxString)
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
		if s.gap += int64(i - start); s.gap > longGap {
			from := start // look from the gap's byte longGap on
			if before < longGap {
				from += int(longGap - before)
			}
			if err := s.longGap(b, from, i); err != nil {
				return 0, err
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
				s.err = &errLimit{msg: fmt.Sprintf("JSON nested deeper than %d levels", s.maxDepth), offset: s.n + int64(i)}
				s.n += int64(i)
				return i, s.err
			}
			if depth == deepBytesDepth {
				s.deepOpen, s.deepStart = true, s.n+int64(i)
			}
		default:
			if depth == deepBytesDepth {
				s.deepOpen = false
			}
			depth--
		}
	}
	if s.deepOpen && s.n+int64(n)-s.deepStart > maxDeepBytes {
		return s.fail(s.deepStart, "a JSON value nested %d levels deep longer than %d bytes", deepBytesDepth, maxDeepBytes)
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
// past longGap bytes: whitespace runs longer than keepSpace are marked to be
// cut, and a number or literal may not pass maxTokenBytes.
func (s *ctrlSanitizer) longGap(b []byte, from, to int) error {
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
			if s.token++; s.token > maxTokenBytes {
				_, err := s.fail(s.n+int64(j), "a JSON number or literal longer than %d bytes", maxTokenBytes)
				return err
			}
		}
		j++
	}
	return nil
}

// compact removes the marked ranges from b, records the cuts and returns
// the bytes left.
func (s *ctrlSanitizer) compact(b []byte) int {
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

// rawOffset maps an offset of the text passed on to the offset in the input.
func (s *ctrlSanitizer) rawOffset(out int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.cuts), func(i int) bool { return s.cuts[i].at > out })
	if i == 0 {
		return out
	}
	return out + s.cuts[i-1].dropped
}
