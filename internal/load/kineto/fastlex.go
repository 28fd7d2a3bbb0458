package kineto

import (
	"bytes"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// This file is the fast path of the events array: a lexer for the JSON
// PyTorch writes there (flat objects of known keys, args one level down),
// which files each event as readEvent does without the general decoder. It
// reads the text from below the sanitiser and does its work on the way:
// control bytes in strings become spaces, and what passes one of its bounds
// goes to the sanitiser (jsonlex.Sanitizer.Detach and Resume). It takes
// only what it fully understands: strict JSON that the decoder would accept
// too. At anything else (a syntax error, an element that is not an object,
// an escape it does not know, an event longer than its buffer, the end of
// the input or a read error) it stops at the element it was reading and
// hands the rest of the document back to the sanitiser and the decoder,
// primed so that the decoder reads that element exactly as if it had read
// every one before it: errors, their offsets and every value are the
// decoder's and the sanitiser's.

// Bounds of the fast path: an event longer than maxLexBuffer, or nested
// deeper than maxLexDepth inside its event, goes to the decoder.
const (
	lexBufferBytes = 256 << 10
	maxLexBuffer   = 4 << 20
	maxLexDepth    = 32
)

// Results of the lexing functions besides an end offset.
const (
	lexMore = -1 // the buffer ends inside the value: read more and try again
	lexOdd  = -2 // not what the fast path reads: the decoder will
)

// lexBuf is the text of the events array the fast path reads and what
// bounds it.
type lexBuf struct {
	b    []byte    // the unread text; cap(b) is the buffer
	base int64     // offset of b[0] in the sanitiser's output
	in   io.Reader // where more text comes from
	err  error     // what ended the input (io.EOF, a read error), once seen

	// raw: the text comes from below the sanitiser (jsonlex.Sanitizer.Detach),
	// and the fast path does its work: control bytes in strings are
	// replaced with spaces (counted in replaced), and what the sanitiser
	// would refuse goes to the decoder through the sanitiser: a string of
	// maxString bytes, a container at depth maxDepth, a long number.
	raw       bool
	replaced  int64
	maxString int
	depth     int // containers open around the events (the array's depth)
	maxDepth  int
}

// fill drops the first drop bytes of b and reads more text after the
// rest, growing the buffer when it is full, up to maxLexBuffer. It reports
// whether new bytes came.
func (l *lexBuf) fill(drop int) bool {
	n := copy(l.b[:cap(l.b)], l.b[drop:])
	l.base += int64(drop)
	l.b = l.b[:n]
	if l.err != nil {
		return false
	}
	if n == cap(l.b) {
		if n >= maxLexBuffer {
			return false
		}
		nb := make([]byte, n, 2*n)
		copy(nb, l.b)
		l.b = nb
	}
	k, err := l.in.Read(l.b[n:cap(l.b)])
	l.b = l.b[:n+k]
	if err != nil {
		l.err = err
	}
	return k > 0
}

// lexEvents reads events from the array whose '[' the decoder has just
// read, as long as they are what the fast path reads, and returns the
// number of elements read; tr.dec is then a new decoder positioned after
// them (at the next element, or the array's ']').
func (tr *traceReader) lexEvents() int {
	depth := tr.dec.StackDepth() // 2 in {"traceEvents": [...]}, 1 in a top-level array
	start := tr.dec.InputOffset() + tr.decBase
	unread := tr.dec.UnreadBuffer()
	l := &lexBuf{b: make([]byte, 0, max(lexBufferBytes, len(unread))), base: start, in: tr.decIn, depth: depth, maxDepth: depth + maxLexDepth}
	l.b = append(l.b, unread...)
	if tr.sanFused {
		// The decoder's text ends where the sanitiser is: read on below it.
		if in, ok := tr.san.Detach(); ok {
			l.in, l.raw = in, true
			l.maxString = int(min(tr.opts.MaxStringBytes, maxLexBuffer))
			if tr.opts.MaxDepth > 0 {
				l.maxDepth = min(l.maxDepth, tr.opts.MaxDepth)
			}
		}
	}
	tr.lex = l
	n, at := 0, 0 // elements read; where the next one's separator starts
	for {
		end := tr.lexElement(l, at, n == 0)
		if end == lexMore {
			more := l.fill(at) // drops b[:at] even when no more comes
			at = 0
			if more {
				continue
			}
		}
		if end < 0 {
			break
		}
		at = end
		n++
		tr.seq++
		tr.queue()
	}
	tr.resumeDecoder(l, at, depth, n > 0)
	tr.lex = nil
	return n
}

// lexElement reads the element after l.b[at:] (its separator, then the
// event) and returns the offset after it, lexMore or lexOdd.
func (tr *traceReader) lexElement(l *lexBuf, at int, first bool) int {
	b := l.b
	i := skipSpace(b, at)
	if !first {
		if i >= len(b) {
			return lexMore
		}
		if b[i] != ',' {
			return lexOdd // the array's end, or an error: the decoder's
		}
		i = skipSpace(b, i+1)
	}
	if i >= len(b) {
		return lexMore
	}
	if b[i] != '{' || l.depth+1 >= l.maxDepth {
		return lexOdd
	}
	mark := len(tr.arena)
	end := tr.lexEvent(l, i)
	if end < 0 {
		tr.arena = tr.arena[:mark]
	}
	return end
}

// resumeDecoder makes tr.dec a decoder of the text from b[at:] on, in the
// state the first decoder would have reached there: inside the events
// array (depth containers open), after an element or not. Text the fast
// path read from below the sanitiser goes through it again from there.
func (tr *traceReader) resumeDecoder(l *lexBuf, at, depth int, afterElement bool) {
	prefix := "["
	if depth == 2 {
		prefix = `{"":[`
	}
	if afterElement {
		prefix += "{}"
	}
	in := l.in
	if l.err != nil {
		in = &stickyErr{l.err} // the reader said it once; say it again
	}
	rest := io.MultiReader(bytes.NewReader(l.b[at:]), in)
	off := l.base + int64(at)
	if l.raw {
		tr.san.Resume(rest, off, depth, l.replaced)
		rest = tr.san
	}
	tr.decIn = io.MultiReader(strings.NewReader(prefix), rest)
	tr.dec = newDecoder(tr.decIn)
	tr.decBase = off - int64(len(prefix))
	must := func(_ any, err error) {
		if err != nil {
			panic("resuming the JSON decoder: " + err.Error())
		}
	}
	if depth == 2 {
		must(tr.dec.ReadToken()) // {
		must(tr.dec.ReadValue()) // ""
	}
	must(tr.dec.ReadToken()) // [
	if afterElement {
		must(tr.dec.ReadValue()) // {}
	}
}

// stickyErr is a reader that fails with err.
type stickyErr struct{ err error }

func (s *stickyErr) Read([]byte) (int, error) { return 0, s.err }

// newDecoder is the JSON decoder of a chrome trace's text.
func newDecoder(r io.Reader) *jsontext.Decoder {
	return jsontext.NewDecoder(r, jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
}

// lexEvent reads the event object at l.b[i] into tr.ev (its text in
// tr.arena) as readEvent does, returning the offset after its '}'.
func (tr *traceReader) lexEvent(l *lexBuf, i int) int {
	ev := &tr.ev
	ev.reset()
	b, depth := l.b, l.depth+1
	return l.object(i, func(key []byte, v int) int {
		if string(key) == `"args"` {
			if b[v] != '{' || !tr.argsWanted() {
				return l.value(v, depth)
			}
			if depth+1 >= l.maxDepth {
				return lexOdd
			}
			ev.hasArgs = true
			return tr.lexArgs(l, v, depth+1)
		}
		dst, num := tr.eventField(key) // num: a plain integer is kept parsed (numField)
		if num && (b[v] == '-' || (b[v] >= '0' && b[v] <= '9')) {
			return tr.lexNumField(b, v, dst)
		}
		end := l.value(v, depth)
		if end >= 0 && dst != nil && b[v] != '{' && b[v] != '[' {
			*dst = tr.put(b[v:end])
		}
		return end
	})
}

// lexArgs reads an event's args object at l.b[i], depth containers deep,
// as readArgs does.
func (tr *traceReader) lexArgs(l *lexBuf, i, depth int) int {
	b := l.b
	return l.object(i, func(key []byte, v int) int {
		dst, num := tr.argField(key) // num: a plain integer is kept parsed (numField)
		if num && (b[v] == '-' || (b[v] >= '0' && b[v] <= '9')) {
			return tr.lexNumField(b, v, dst)
		}
		end := l.value(v, depth)
		if end >= 0 && dst != nil {
			*dst = tr.put(b[v:end])
		}
		return end
	})
}

// lexNumField reads the number at b[v] into *dst, parsed when it is a
// plain integer, as text otherwise, and returns what lexNumber does.
func (tr *traceReader) lexNumField(b []byte, v int, dst *field) int {
	end, x, plain := lexInt(b, v)
	if plain {
		*dst = tr.putInt(x)
	} else if end >= 0 {
		*dst = tr.put(b[v:end])
	}
	return end
}
