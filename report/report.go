// Package report renders torchmem's results for people and machines: text
// for a terminal, Markdown for a bug ticket, JSON, a self-contained HTML page,
// JUnit and GitHub annotations for CI. It formats; it does not analyse.
package report

import (
	json "github.com/go-json-experiment/json/v1"
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

// writeJSON writes v as indented JSON (the machine outputs of every command),
// the bytes of a json.Encoder with an indent of two spaces.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	out := indentJSON(make([]byte, 0, len(b)+len(b)/2+1), b)
	_, err = w.Write(append(out, '\n'))
	return err
}

// oneOrMany is one input's result as an object, several inputs' as an array.
func oneOrMany[T any](items []T) any {
	if len(items) == 1 {
		return items[0]
	}
	return items
}
