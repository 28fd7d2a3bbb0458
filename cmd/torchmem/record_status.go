package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// hookEvent is one line of a hook status file (hook/sitecustomize.py
// writes them: one file per Python process, one JSON object a line).
type hookEvent struct {
	Event   string  `json:"event"`
	Pid     int     `json:"pid"`
	Time    float64 `json:"time"`
	Version string  `json:"version"` // python, torch
	API     string  `json:"api"`     // recording: string or legacy
	Kind    string  `json:"kind"`    // dump: oom, exit, signal, sigterm, trace
	Path    string  `json:"path"`    // dump
	Rank    int     `json:"rank"`    // dump
	Why     string  `json:"why"`     // not_recording
	What    string  `json:"what"`    // error
	Error   string  `json:"error"`   // error
}

// hookStatus is what every hooked process of one run reported.
type hookStatus struct {
	events []hookEvent
}

// maxStatusBytes bounds what is read of one status file (a process writes
// a few hundred bytes; the command could write anything there).
const maxStatusBytes = 1 << 20

// readHookStatus reads the status files in the hook's folder. Lines that
// are not events (a process killed mid-write) are skipped.
func readHookStatus(state string) hookStatus {
	var st hookStatus
	files, _ := filepath.Glob(filepath.Join(state, "status-*.jsonl"))
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(io.LimitReader(f, maxStatusBytes))
		for sc.Scan() {
			var e hookEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Event != "" {
				st.events = append(st.events, e)
			}
		}
		f.Close()
	}
	sort.SliceStable(st.events, func(i, j int) bool { return st.events[i].Time < st.events[j].Time })
	return st
}

// has reports whether any process reported the event.
func (st hookStatus) has(event string) bool {
	for _, e := range st.events {
		if e.Event == event {
			return true
		}
	}
	return false
}

// usr1Pids are the processes whose hook handles SIGUSR1 and that have not
// reached their exit handler.
func (st hookStatus) usr1Pids() []int {
	ended := map[int]bool{}
	for _, e := range st.events {
		if e.Event == "not_recording" || e.Event == "dump" && (e.Kind == "exit" || e.Kind == "sigterm") {
			ended[e.Pid] = true
		}
	}
	var pids []int
	for _, e := range st.events {
		if e.Event == "sigusr1" && !ended[e.Pid] && !slices.Contains(pids, e.Pid) {
			pids = append(pids, e.Pid)
		}
	}
	return pids
}

// recordedFile is a file a hook wrote, as its last dump event says.
type recordedFile struct {
	path string
	kind string // oom, exit, signal, sigterm, trace
	rank int
	pid  int
	time float64
}

// files are the files the hooks wrote and that still exist, in the order
// they are worth reading: out-of-memory snapshots (the first OOM first),
// then the other snapshots, then traces, by rank.
func (st hookStatus) files() []recordedFile {
	last := map[string]recordedFile{}
	for _, e := range st.events {
		if e.Event == "dump" && e.Path != "" {
			last[e.Path] = recordedFile{path: e.Path, kind: e.Kind, rank: e.Rank, pid: e.Pid, time: e.Time}
		}
	}
	var out []recordedFile
	for _, f := range last {
		if _, err := os.Stat(f.path); err == nil {
			out = append(out, f)
		}
	}
	order := func(f recordedFile) int {
		switch f.kind {
		case "oom":
			return 0
		case "trace":
			return 2
		}
		return 1
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if order(a) != order(b) {
			return order(a) < order(b)
		}
		if a.kind == "oom" && a.time != b.time {
			return a.time < b.time
		}
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		return a.path < b.path
	})
	return out
}

// whyNothing says why a run wrote no file, from what its hooks reported.
func (st hookStatus) whyNothing() string {
	switch {
	case !st.has("python"):
		return "no Python process ran the hook (not Python, or python -E, -I or -S)"
	case !st.has("torch"):
		return "the program never imported torch"
	case !st.has("recording"):
		var whys []string
		for _, e := range st.events {
			if e.Event == "not_recording" && e.Why != "" && !slices.Contains(whys, e.Why) {
				whys = append(whys, e.Why)
			}
		}
		if errs := st.errors(); len(errs) > 0 {
			whys = append(whys, errs...)
		}
		if len(whys) == 0 {
			return "torch was imported; the process was killed before it could say more"
		}
		return strings.Join(whys, "; ")
	}
	if errs := st.errors(); len(errs) > 0 {
		return "no snapshot could be written: " + strings.Join(errs, "; ")
	}
	return "killed before its exit dump, by a signal the hook cannot catch such as SIGKILL (SIGUSR1 dumps while it runs)"
}

// errors are the hooks' error reports, once each.
func (st hookStatus) errors() []string {
	var out []string
	for _, e := range st.events {
		if e.Event == "error" {
			if s := e.What + ": " + e.Error; !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}
