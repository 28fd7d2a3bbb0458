package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/report"
	"github.com/torchmem/torchmem/snapshot"
)

// recordKinds says what each kind of recorded file is.
var recordKinds = map[string]string{
	"oom":    "out of memory, dumped before the error was raised",
	"exit":   "at exit",
	"signal": "on SIGUSR1",
	"trace":  "profiler trace",
}

// reportRecording tells, on stderr, what a recorded run wrote: the analysis
// of its most telling file (an OOM snapshot first) with DIR/report.html, and
// the list of files; or, in one line, why nothing was recorded.
func reportRecording(g *globals, o recordOptions, dir string, st hookStatus, exit childExit) {
	w := g.stderr
	files := st.files()
	if len(files) == 0 {
		if exit.signalled() {
			fmt.Fprintf(w, "torchmem: the command %s\n", exit)
		}
		fmt.Fprintf(w, "torchmem: nothing was recorded: %s\n", snapshot.OneLine(st.whyNothing()))
		return
	}
	for _, e := range st.errors() {
		fmt.Fprintf(w, "torchmem: the recording hook reported %s\n", clip(snapshot.OneLine(e), 60))
	}
	var page bytes.Buffer
	if !o.noAnalyze {
		// Named as the user named DIR (the command ran in this folder too).
		page = analyseRecorded(g, w, filepath.Join(o.dir, filepath.Base(files[0].path)))
	}
	fmt.Fprintf(w, "torchmem: the command %s; files in %s:\n", exit, snapshot.OneLine(o.dir))
	for i, f := range files {
		what := recordKinds[f.kind]
		if i == 0 && page.Len() > 0 {
			what += " (analysed above)"
		}
		fmt.Fprintf(w, "  %-36s %s\n", filepath.Base(f.path), what)
	}
	if page.Len() > 0 {
		if err := writeFileAtomic(filepath.Join(dir, "report.html"), page.Bytes()); err != nil {
			fmt.Fprintf(w, "torchmem: report.html: %v\n", withoutTempName(err))
		} else {
			fmt.Fprintf(w, "  %-36s the HTML report of the file analysed above (%s)\n", "report.html",
				analysis.FormatBytes(int64(page.Len())))
		}
	}
}

// analyseRecorded prints the analysis of a recorded file and returns its
// HTML report (empty when the file cannot be read).
func analyseRecorded(g *globals, w io.Writer, path string) bytes.Buffer {
	var page bytes.Buffer
	s, err := g.open(path)
	if err != nil {
		fmt.Fprintf(w, "torchmem: %s\n", snapshot.OneLine(err.Error()))
		return page
	}
	r := g.budget.fit(g.analyze(s, analysis.DefaultOptions()))
	if err := writeResults(w, "text", 5, []*analysis.Result{r}); err != nil { // as analyze prints it
		fmt.Fprintf(w, "torchmem: %v\n", err)
	}
	if err := report.HTML(&page, r, report.HTMLOptions{Version: version}); err != nil {
		fmt.Fprintf(w, "torchmem: report.html: %v\n", err)
		page.Reset()
	}
	return page
}

// withoutTempName drops the temporary file's name from a write error.
func withoutTempName(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// clip shortens s to at most n characters, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
