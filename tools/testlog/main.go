// Command testlog turns the JSON of go test -json into the log a person
// reads, as plain go test writes it — each package's result, the output of
// the tests that failed — and ends it with the tests that were skipped and
// why: in CI, where every test must run, a skip is a test that cannot fail.
// make test pipes go test through it; it exits 1 when a test or a package
// failed, or when the stream holds no result at all.
//
//	go test -json ./... | go run ./tools/testlog
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build output (go 1.24+)
}

// skipped is a test that was skipped and what it said.
type skipped struct{ name, reason string }

// summarize reads go test -json from r, writes the log to w and reports
// whether everything passed.
func summarize(r io.Reader, w io.Writer) bool {
	out := map[string][]string{} // package + test → its output lines
	var skips []skipped
	ok, results := true, 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintln(w, sc.Text()) // not JSON: go's own message
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Action == "build-fail":
			ok = false
		case e.Test == "" && e.Action == "output" && e.Output != "PASS\n":
			fmt.Fprint(w, e.Output) // the test binary's PASS is not shown by go test either
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			results++
			ok = ok && e.Action != "fail"
		case e.Test == "" && e.Action == "output":
		case e.Action == "output":
			out[key] = append(out[key], e.Output)
		case e.Action == "fail":
			ok = false
			fmt.Fprint(w, strings.Join(out[key], ""))
			delete(out, key)
		case e.Action == "skip":
			skips = append(skips, skipped{e.Package + "." + e.Test, reason(out[key])})
			delete(out, key)
		case e.Action == "pass":
			delete(out, key)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(w, "testlog: reading go test -json: %v\n", err)
		ok = false
	}
	if results == 0 {
		fmt.Fprintln(w, "testlog: no package result in the input")
		ok = false
	}
	sort.Slice(skips, func(i, j int) bool { return skips[i].name < skips[j].name })
	if len(skips) == 0 {
		fmt.Fprintln(w, "skipped tests: none")
	} else {
		fmt.Fprintf(w, "skipped tests: %d\n", len(skips))
		for _, s := range skips {
			fmt.Fprintf(w, "  %s: %s\n", s.name, s.reason)
		}
	}
	return ok
}

// reason is what a skipped test said (t.Skip's message), on one line.
func reason(lines []string) string {
	var parts []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		parts = append(parts, l)
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " / ")
}

func main() {
	if !summarize(os.Stdin, os.Stdout) {
		os.Exit(1)
	}
}
