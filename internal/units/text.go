package units

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// OneLine makes text from an input (quoted in an error, printed in a
// report) one inert line: line breaks and tabs become spaces; other control
// characters — C0, DEL and the C1 range, whose 0x9b starts terminal escape
// sequences — and bytes that are not UTF-8 (a raw 0x9b, 0x9c or 0x9d among
// them) become \xNN. Text that a CI log would run as a GitHub workflow
// command is defused: "::" at its start or after a space (where a wrapped
// line may start) becomes "\x3a:", and "##[" anywhere becomes "##\x5b".
func OneLine(s string) string {
	if !needsOneLine(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case isControl(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	out := b.String()
	if strings.HasPrefix(out, "::") {
		out = "\\x3a" + out[1:]
	}
	return strings.NewReplacer(" ::", " \\x3a:", "##[", "##\\x5b").Replace(out)
}

// needsOneLine reports whether OneLine changes s.
func needsOneLine(s string) bool {
	return strings.ContainsFunc(s, isControl) || !utf8.ValidString(s) || strings.Contains(s, "##[") ||
		strings.HasPrefix(s, "::") || strings.Contains(s, " ::")
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// ClipRunes shortens s to at most n runes, the last of them "…" when it
// cuts; a label keeps its width in a table or a chart.
func ClipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// ClipBytes keeps the first n bytes of s and marks the cut with "…": a
// bound on text an input may make as long as it likes, kept for a message.
// It may cut inside a UTF-8 sequence; OneLine shows such a byte escaped.
func ClipBytes(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Plural is "1 rank", "3 ranks": the count, then the word with an s unless
// the count is one.
func Plural[T ~int | ~int64](n T, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
