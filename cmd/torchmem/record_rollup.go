package main

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/report"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/rollup"
)

// recordProcesses counts the processes that wrote the files.
func recordProcesses(files []recordedFile) int {
	var pids []int
	for _, f := range files {
		if !slices.Contains(pids, f.pid) {
			pids = append(pids, f.pid)
		}
	}
	return len(pids)
}

// rankPageName is the name of a recording process's own page.
func rankPageName(p rollup.Process) string {
	return fmt.Sprintf("report_rank%d_%d.html", p.Rank, p.Pid)
}

// recordRollup is what rollupRecorded made: the roll-up page and the pages
// of the processes it links (the files they show, by page name).
type recordRollup struct {
	page  bytes.Buffer
	pages map[string]string // input path → page name
	files []string          // the inputs whose page was written
}

// rollupRecorded analyses every file that a run of several processes
// wrote, as `torchmem analyze DIR` does, and prints the same roll-up on w;
// it writes each process's own page into dir (the report of its OOM
// snapshot, else its snapshot, else its trace), and returns the roll-up
// page, which links them. userDir is DIR as the user named it.
func rollupRecorded(g *globals, w io.Writer, dir *recordDir, userDir string, files []recordedFile) *recordRollup {
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join(userDir, filepath.Base(f.path)))
	}
	slices.Sort(paths) // the order analyze DIR reads them in
	shown := map[rollup.Process]string{}
	for _, p := range paths {
		proc, ok := rollup.ProcessOf(p)
		if !ok {
			continue
		}
		key := rollup.Process{Rank: proc.Rank, Pid: proc.Pid}
		if cur, ok := shown[key]; !ok || rollup.Prefer(proc.Kind, mustProcess(cur).Kind) {
			shown[key] = p
		}
	}
	rr := &recordRollup{pages: map[string]string{}}
	page := map[string]string{}
	for key, p := range shown {
		page[p] = rankPageName(key)
	}

	// The text for the terminal and the page, written once every input is in.
	ro, _ := newRollupOutput(w, string(report.FormatText), "", 5)
	html, _ := report.Rollups.Lookup(string(report.FormatHTML))
	rollupPage := html.Write(&rr.page, report.Options{HTML: report.HTMLOptions{Version: version, RankPages: rr.pages}})
	use := func(r *result.Result) error {
		if name := page[r.Input.Path]; name != "" {
			var b bytes.Buffer
			err := report.HTML(&b, r, report.HTMLOptions{Version: version})
			if err == nil {
				err = dir.write(name, b.Bytes())
			}
			if err != nil {
				fmt.Fprintf(w, "torchmem: %s: %v\n", name, err)
			} else {
				rr.pages[r.Input.Path] = name
				rr.files = append(rr.files, r.Input.Path)
			}
		}
		for i := range r.Devices {
			r.Devices[i].Timeline = nil // only a page needs it
		}
		if err := rollupPage.Input(r); err != nil {
			return err
		}
		return ro.add(r)
	}
	// An input that fails is listed in the roll-up; the run's own exit
	// status is the command's.
	_ = g.analyzeAll(paths, analysis.DefaultOptions(), use, ro.fail)
	if ro.b.Results() == 0 {
		ro.tellFailures(w)
		return rr
	}
	ru := ro.b.Rollup()
	if err := ro.out.Finish(ru); err != nil {
		fmt.Fprintf(w, "torchmem: %v\n", err)
	}
	if err := rollupPage.Finish(ru); err != nil {
		fmt.Fprintf(w, "torchmem: report.html: %v\n", err)
		rr.page.Reset()
	}
	return rr
}

// mustProcess is the process of a path known to be one record named.
func mustProcess(path string) rollup.Process {
	p, _ := rollup.ProcessOf(path)
	return p
}
