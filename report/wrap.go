package report

import (
	"strings"
	"unicode/utf8"
)

// TextWidth is the most columns a line of torchmem's text output takes.
const TextWidth = 100

// wrapText breaks s at spaces into lines of at most width columns (one
// column per rune), the first line starting with first and the others with
// rest. A word longer than a line is cut, so no line is ever wider.
func wrapText(first, rest, s string, width int) []string {
	var lines []string
	prefix := first
	line := prefix
	empty := true // nothing but the prefix on the line yet
	for _, word := range strings.Fields(s) {
		for word != "" {
			room := width - utf8.RuneCountInString(line)
			need := utf8.RuneCountInString(word)
			if !empty {
				need++ // the space before the word
			}
			if need <= room {
				if !empty {
					line += " "
				}
				line += word
				word, empty = "", false
				continue
			}
			if !empty { // start a new line and try again
				lines = append(lines, line)
				line, empty = rest, true
				continue
			}
			// A word longer than a whole line: cut it.
			cut := max(room, 1)
			line += string([]rune(word)[:cut])
			word = string([]rune(word)[cut:])
			lines = append(lines, line)
			line, empty = rest, true
		}
	}
	if !empty || len(lines) == 0 {
		lines = append(lines, line)
	}
	return lines
}

// wrap writes s wrapped to TextWidth columns: first starts the first line,
// rest (usually spaces) the others.
func (p *printer) wrap(first, rest, s string) {
	for _, l := range wrapText(first, rest, s, TextWidth) {
		p.f("%s\n", l)
	}
}
