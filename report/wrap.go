package report

import (
	"strings"
	"unicode/utf8"
)

// TextWidth is the most columns a line of torchmem's text output takes.
const TextWidth = 100

// wrapText breaks s at spaces into lines of at most width columns (one
// column per rune), the first line starting with first and the others with
// rest. A word longer than a line is cut, so no line is ever wider. Work is
// linear in the length of s, however long its words (a frame name of a
// hostile file can be megabytes).
func wrapText(first, rest, s string, width int) []string {
	var lines []string
	line := first
	cols := utf8.RuneCountInString(line) // columns used on the line
	empty := true                        // nothing but the prefix on the line yet
	for _, word := range keepUnits(strings.Fields(s)) {
		wordCols := utf8.RuneCountInString(word)
		for word != "" {
			room := width - cols
			need := wordCols
			if !empty {
				need++ // the space before the word
			}
			if need <= room {
				if !empty {
					line += " "
					cols++
				}
				line += word
				cols += wordCols
				word, empty = "", false
				continue
			}
			if !empty { // start a new line and try again
				lines = append(lines, line)
				line, cols, empty = rest, utf8.RuneCountInString(rest), true
				continue
			}
			// A word longer than a whole line: cut it.
			cut := max(room, 1)
			at := runeOffset(word, cut)
			lines = append(lines, line+word[:at])
			word, wordCols = word[at:], wordCols-cut
			line, cols, empty = rest, utf8.RuneCountInString(rest), true
		}
	}
	if !empty || len(lines) == 0 {
		lines = append(lines, line)
	}
	return lines
}

// runeOffset is the byte offset of the n-th rune of s (len(s) past its end).
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

// keepUnits joins a byte unit to the number before it ("21.7" "GiB," →
// "21.7 GiB," one word), and a count to the word it counts ("175"
// "segment_map"), so that a wrap never separates them.
func keepUnits(words []string) []string {
	out := words[:0:0]
	for _, w := range words {
		if n := len(out); n > 0 && (isUnit(w) && endsInDigit(out[n-1]) || isCount(out[n-1]) && w != "" && isLetter(w[0])) {
			out[n-1] += " " + w
			continue
		}
		out = append(out, w)
	}
	return out
}

func isUnit(w string) bool {
	for _, u := range []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"} {
		if rest, ok := strings.CutPrefix(w, u); ok && (rest == "" || !isLetter(rest[0])) {
			return true
		}
	}
	return false
}

// isCount reports whether w is a whole number ("6", "2,434").
func isCount(w string) bool {
	if w == "" || w[0] == ',' {
		return false
	}
	for i := 0; i < len(w); i++ {
		if (w[i] < '0' || w[i] > '9') && w[i] != ',' {
			return false
		}
	}
	return true
}

func endsInDigit(w string) bool { return w != "" && w[len(w)-1] >= '0' && w[len(w)-1] <= '9' }

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// wrap writes s wrapped to TextWidth columns: first starts the first line,
// rest (usually spaces) the others.
func (p *printer) wrap(first, rest, s string) {
	for _, l := range wrapText(first, rest, s, TextWidth) {
		p.f("%s\n", inertLine(l))
	}
}

// inertLine defuses a line that a GitHub Actions log would run as a
// workflow command: a cut word of input text may start it with "::"
// (snapshot.OneLine defuses whole words).
func inertLine(l string) string {
	t := strings.TrimLeft(l, " ")
	if !strings.HasPrefix(t, "::") {
		return l
	}
	return l[:len(l)-len(t)] + `\x3a` + t[1:]
}
