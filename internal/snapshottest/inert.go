package snapshottest

import (
	"strings"
	"unicode/utf8"
)

// NotInert reports why out is not inert for a terminal, a CI log or
// Markdown ("" when it is): text that is not UTF-8, control characters
// (C0, DEL and the 8-bit C1 range a terminal reads as CSI/OSC/ST), a GitHub
// workflow command (a line starting "::" after blanks, or the legacy "##["
// anywhere), and for Markdown HTML outside a code span (whose text Markdown
// never reads as HTML).
func NotInert(out string, markdown bool) string {
	if !utf8.ValidString(out) {
		return "invalid UTF-8"
	}
	for _, r := range out {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "control character " + string(r)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " \t"), "::") {
			return "workflow command line " + line
		}
		if strings.Contains(line, "##[") {
			return "legacy workflow command " + line
		}
	}
	if markdown {
		parts := strings.Split(out, "`")
		for i := 0; i < len(parts); i += 2 {
			if strings.Contains(parts[i], "<") {
				return "raw HTML: " + parts[i]
			}
		}
	}
	return ""
}
