package kineto

import (
	"bytes"
	"encoding/binary"
)

// This file checks the JSON values of the events' fast path (fastlex.go)
// in its buffer: objects, arrays, strings, numbers and literals as the
// decoder would accept them, returning the offset after each, or lexMore
// when the buffer ends inside it, or lexOdd for anything else.

// object reads the object at l.b[i] (a '{'): member gets each key as
// written (quotes and escapes included) and the offset of its value, and
// returns the offset after the value (or lexMore, lexOdd). It returns the
// offset after the object's '}'.
func (l *lexBuf) object(i int, member func(key []byte, v int) int) int {
	b := l.b
	i = skipSpace(b, i+1)
	if i >= len(b) {
		return lexMore
	}
	if b[i] == '}' {
		return i + 1
	}
	for {
		if b[i] != '"' {
			return lexOdd
		}
		k := l.str(i)
		if k < 0 {
			return k
		}
		key := b[i:k]
		i = skipSpace(b, k)
		if i >= len(b) {
			return lexMore
		}
		if b[i] != ':' {
			return lexOdd
		}
		if i = skipSpace(b, i+1); i >= len(b) {
			return lexMore
		}
		if i = member(key, i); i < 0 {
			return i
		}
		if i = skipSpace(b, i); i >= len(b) {
			return lexMore
		}
		switch b[i] {
		case '}':
			return i + 1
		case ',':
			if i = skipSpace(b, i+1); i >= len(b) {
				return lexMore
			}
		default:
			return lexOdd
		}
	}
}

// value checks the value at l.b[i] (i < len(l.b)) inside a container at
// depth and returns the offset after it. A number or literal is complete
// only when a byte follows it.
func (l *lexBuf) value(i, depth int) int {
	b := l.b
	switch c := b[i]; {
	case c == '"':
		return l.str(i)
	case c == '{':
		if depth+1 >= l.maxDepth {
			return lexOdd
		}
		return l.object(i, func(_ []byte, v int) int { return l.value(v, depth+1) })
	case c == '[':
		if depth+1 >= l.maxDepth {
			return lexOdd
		}
		return l.array(i, depth+1)
	case c == '-' || (c >= '0' && c <= '9'):
		return lexNumber(b, i)
	case c == 't':
		return lexLiteral(b, i, "true")
	case c == 'f':
		return lexLiteral(b, i, "false")
	case c == 'n':
		return lexLiteral(b, i, "null")
	}
	return lexOdd
}

// array checks the array at l.b[i] (a '['), at depth.
func (l *lexBuf) array(i, depth int) int {
	b := l.b
	i = skipSpace(b, i+1)
	if i >= len(b) {
		return lexMore
	}
	if b[i] == ']' {
		return i + 1
	}
	for {
		if i = l.value(i, depth); i < 0 {
			return i
		}
		if i = skipSpace(b, i); i >= len(b) {
			return lexMore
		}
		switch b[i] {
		case ']':
			return i + 1
		case ',':
			if i = skipSpace(b, i+1); i >= len(b) {
				return lexMore
			}
		default:
			return lexOdd
		}
	}
}

// strPlain marks the bytes a string holds as they are: not a quote, not a
// backslash, not a control byte.
var strPlain [256]bool

func init() {
	for c := 0x20; c < 256; c++ {
		strPlain[c] = c != '"' && c != '\\'
	}
}

// str checks the string at l.b[i] (a '"') and returns the offset after
// its closing quote. Escapes are the JSON ones; \u takes four hex digits,
// a lone surrogate included (the decoder allows invalid UTF-8). A control
// byte is replaced with a space, as the sanitiser does, when the text is
// raw; after a backslash it is the decoder's error.
func (l *lexBuf) str(i int) int {
	b := l.b
	start := i
	i++
	for {
		for i < len(b) && strPlain[b[i]] {
			i++
		}
		if i >= len(b) {
			return lexMore
		}
		if l.maxString > 0 && i-start >= l.maxString {
			return lexOdd
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(b) {
				return lexMore
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return lexMore
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return lexOdd
					}
				}
				i += 6
			default:
				return lexOdd
			}
		default: // a control byte
			if !l.raw {
				return lexOdd
			}
			b[i] = ' '
			l.replaced++
			i++
		}
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// maxLexNumber is the longest number the fast path reads (the sanitiser
// bounds a number, in a long run of text without brackets, at 64 KiB).
const maxLexNumber = 1024

// lexNumber checks the JSON number at b[i] and returns the offset after it.
func lexNumber(b []byte, i int) int {
	stop := i + maxLexNumber
	if b[i] == '-' {
		i++
	}
	i, ok := lexDigits(b, i, stop, true)
	if !ok {
		return i
	}
	if b[i] == '.' {
		if i, ok = lexDigits(b, i+1, stop, false); !ok {
			return i
		}
	}
	if b[i] == 'e' || b[i] == 'E' {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i, ok = lexDigits(b, i, stop, false); !ok {
			return i
		}
	}
	return i
}

// lexInt is lexNumber that also parses the number when it is a plain
// integer: an optional minus and at most 18 digits (no overflow possible),
// no leading zero, no fraction or exponent, a byte after it. On such text
// jsonlex.ParseInt gives the same value.
func lexInt(b []byte, i int) (end int, v int64, plain bool) {
	j := i
	if b[j] == '-' {
		j++
	}
	start := j
	if j < len(b) && b[j] == '0' {
		j++ // the number's integer part, as in lexDigits
	} else {
		// Eight digits at a time while they fit (a trace's times and
		// addresses have 15 or 16), then one at a time.
		for j+8 <= len(b) && j-start <= 10 {
			d, ok := eightDigits(binary.LittleEndian.Uint64(b[j:]))
			if !ok {
				break
			}
			v = v*100_000_000 + int64(d)
			j += 8
		}
		for j < len(b) && j-start < 18 && b[j] >= '0' && b[j] <= '9' {
			v = v*10 + int64(b[j]-'0')
			j++
		}
	}
	if j < len(b) && j > start {
		switch c := b[j]; {
		case c == '.', c == 'e', c == 'E', c >= '0' && c <= '9' && b[start] != '0':
		default:
			if b[i] == '-' {
				v = -v
			}
			return j, v, true
		}
	}
	return lexNumber(b, i), 0, false
}

// eightDigits is the value of eight ASCII digits loaded little-endian (the
// first the most significant), and whether they all are digits.
func eightDigits(x uint64) (uint64, bool) {
	const ones = 0x0101010101010101
	// Each byte 0x30-0x39: its high nibble 3, and still 3 with 6 added
	// (no byte carries into the next: each is at most 0x3F).
	if x&(0xF0*ones) != 0x30*ones || (x+0x06*ones)&(0xF0*ones) != 0x30*ones {
		return 0, false
	}
	x -= 0x30 * ones
	x = x*10 + x>>8 // pairs of digits in every other byte
	x = ((x&0x000000FF000000FF)*(100+1000000<<32) + (x>>16&0x000000FF000000FF)*(1+10000<<32)) >> 32
	return x, true
}

// lexDigits reads the digits at b[i:] (an integer part when intPart: no
// leading zero), at least one. It fails with lexMore when b ends in or
// right after them (the number may go on), lexOdd when there are none or
// they reach stop.
func lexDigits(b []byte, i, stop int, intPart bool) (int, bool) {
	if i >= len(b) {
		return lexMore, false
	}
	if b[i] < '0' || b[i] > '9' {
		return lexOdd, false
	}
	if intPart && b[i] == '0' {
		i++
	} else {
		for i < len(b) && i < stop && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i >= stop {
		return lexOdd, false
	}
	if i >= len(b) {
		return lexMore, false
	}
	return i, true
}

// lexLiteral checks the literal lit at b[i]; a letter or digit after it
// makes it something else (the decoder's error).
func lexLiteral(b []byte, i int, lit string) int {
	if len(b)-i <= len(lit) {
		if !bytes.HasPrefix([]byte(lit), b[i:]) {
			return lexOdd
		}
		return lexMore
	}
	if string(b[i:i+len(lit)]) != lit {
		return lexOdd
	}
	return i + len(lit)
}
