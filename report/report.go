// Package report renders torchmem's results for people and machines: text
// for a terminal, Markdown for a bug ticket, JSON, a self-contained HTML page,
// JUnit and GitHub annotations for CI. It formats; it does not analyse.
package report

import (
	"encoding/json"
	"io"
	"strings"
)

// FileName is how a report's header names an input: its base name, never
// the absolute path of the machine that ran torchmem ("-" is stdin).
func FileName(p string) string {
	if p == "-" {
		return "stdin"
	}
	p = strings.TrimRight(strings.ReplaceAll(p, "\\", "/"), "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	return p
}

// writeJSON writes v as indented JSON (the machine outputs of every command).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// oneOrMany is one input's result as an object, several inputs' as an array.
func oneOrMany[T any](items []T) any {
	if len(items) == 1 {
		return items[0]
	}
	return items
}
