package main

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/report"
)

// recordKinds says what each kind of recorded file is.
var recordKinds = map[string]string{
	"oom":     "out of memory, dumped before the error was raised",
	"exit":    "at exit",
	"signal":  "on SIGUSR1",
	"sigterm": "on SIGTERM, before the signal ended the process",
	"trace":   "profiler trace",
}

// reportRecording tells, on stderr, what a recorded run wrote: the analysis
// of its most telling file (an OOM snapshot first) with DIR/report.html, and
// the list of files; or, in one line, why nothing was recorded.
func reportRecording(g *globals, o recordOptions, dir *recordDir, st hookStatus, exit childExit) {
	w := g.stderr
	files := st.files()
	if len(files) == 0 {
		if exit.signalled() {
			fmt.Fprintf(w, "torchmem: the command %s\n", exit)
		}
		fmt.Fprintf(w, "torchmem: nothing was recorded: %s\n", units.OneLine(st.whyNothing()))
		return
	}
	for _, e := range st.errors() {
		fmt.Fprintf(w, "torchmem: the recording hook reported %s\n", units.ClipRunes(units.OneLine(e), 60))
	}
	processes := recordProcesses(files)
	var page bytes.Buffer
	var rr *recordRollup
	switch {
	case o.noAnalyze:
	case processes > 1:
		// Every process's files, rolled up as analyze DIR does.
		rr = rollupRecorded(g, w, dir, o.dir, files)
		page = rr.page
	default:
		// Named as the user named DIR (the command ran in this folder too).
		page = analyseRecorded(g, w, filepath.Join(o.dir, filepath.Base(files[0].path)))
	}
	fmt.Fprintf(w, "torchmem: the command %s; files in %s:\n", exit, units.OneLine(o.dir))
	for i, f := range files {
		what := recordKinds[f.kind]
		switch {
		case rr != nil && rr.pages[filepath.Join(o.dir, filepath.Base(f.path))] != "":
			what += fmt.Sprintf(" (rank %d in the roll-up above)", f.rank)
		case rr == nil && i == 0 && page.Len() > 0:
			what += " (analysed above)"
		}
		fmt.Fprintf(w, "  %-36s %s\n", filepath.Base(f.path), what)
	}
	if page.Len() == 0 {
		return
	}
	if err := dir.write("report.html", page.Bytes()); err != nil {
		fmt.Fprintf(w, "torchmem: report.html: %v\n", err)
		return
	}
	if rr == nil {
		fmt.Fprintf(w, "  %-36s the HTML report of the file analysed above (%s)\n", "report.html",
			units.FormatBytes(int64(page.Len())))
		return
	}
	fmt.Fprintf(w, "  %-36s the roll-up of the %d processes (%s), linking each one's own page:\n", "report.html",
		processes, units.FormatBytes(int64(page.Len())))
	fmt.Fprintf(w, "  %-36s the HTML report of each process's file analysed above (%d of %d)\n", "report_rank{R}_{pid}.html",
		len(rr.files), processes)
}

// analyseRecorded prints the analysis of a recorded file and returns its
// HTML report (empty when the file cannot be read).
func analyseRecorded(g *globals, w io.Writer, path string) bytes.Buffer {
	var page bytes.Buffer
	s, err := g.open(path)
	if err != nil {
		fmt.Fprintf(w, "torchmem: %s\n", units.OneLine(err.Error()))
		return page
	}
	r := g.budget.fit(g.analyze(s, analysis.DefaultOptions()))
	if err := report.TextTop(w, r, 5); err != nil { // as analyze prints it
		fmt.Fprintf(w, "torchmem: %v\n", err)
	}
	if err := report.HTML(&page, r, report.HTMLOptions{Version: version}); err != nil {
		fmt.Fprintf(w, "torchmem: report.html: %v\n", err)
		page.Reset()
	}
	return page
}
