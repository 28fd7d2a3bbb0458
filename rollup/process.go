package rollup

import (
	"path/filepath"
	"regexp"
	"strconv"
)

// FileKind is what a file that torchmem record wrote holds, as its name
// says.
type FileKind string

// The files of one recording process, in the order a roll-up prefers them.
const (
	// KindOOMSnapshot: oom_snapshot_rank{R}_{pid}.pickle, dumped by the
	// out-of-memory observer before the error reached the program.
	KindOOMSnapshot FileKind = "oom_snapshot"
	// KindSnapshot: snapshot_rank{R}_{pid}.pickle, dumped at exit or on a
	// signal (the last dump replaces the earlier ones).
	KindSnapshot FileKind = "snapshot"
	// KindTrace: trace_rank{R}_{pid}.json.gz, a profiler trace of a few
	// steps of the same process.
	KindTrace FileKind = "trace"
)

// preference orders a process's files: the OOM snapshot first (the state
// at the failure), then its other snapshot (the whole history), then a
// trace (a few steps).
func (k FileKind) preference() int {
	switch k {
	case KindOOMSnapshot:
		return 0
	case KindSnapshot:
		return 1
	}
	return 2
}

// Prefer says whether a process's file of kind a is preferred to one of
// kind b as the rank's row (an OOM snapshot to a snapshot to a trace).
func Prefer(a, b FileKind) bool { return a.preference() < b.preference() }

// Process is the process that wrote a file, as torchmem record names its
// files: the rank (RANK or LOCAL_RANK) and the process id.
type Process struct {
	Rank, Pid int
	Kind      FileKind
}

// recordName is the name of a file torchmem record writes, gzip-compressed
// or not.
var recordName = regexp.MustCompile(`^(oom_snapshot|snapshot|trace)_rank([0-9]+)_([0-9]+)\.(?:pickle|json)(?:\.gz)?$`)

// ProcessOf says which process wrote the file at path, when its name is
// one torchmem record gives (oom_snapshot_rank3_4242.pickle,
// snapshot_rank3_4242.pickle, trace_rank3_4242.json.gz): files of one
// process are one rank of the run, never several.
func ProcessOf(path string) (Process, bool) {
	m := recordName.FindStringSubmatch(filepath.Base(filepath.FromSlash(path)))
	if m == nil {
		return Process{}, false
	}
	rank, err1 := strconv.Atoi(m[2])
	pid, err2 := strconv.Atoi(m[3])
	if err1 != nil || err2 != nil || rank > maxNamedRank {
		return Process{}, false
	}
	return Process{Rank: rank, Pid: pid, Kind: FileKind(m[1])}, true
}

// SameProcess is another file of the process a row's input comes from: not
// a rank of its own.
type SameProcess struct {
	Input int    `json:"input"`
	Path  string `json:"path"`
	// What it is: "after_oom" (a snapshot of the process whose history
	// holds the OOM of the row's OOM snapshot: dumped after it, at exit or
	// on a signal), "snapshot" (another snapshot of the process) or
	// "trace".
	What string `json:"what"`
	// AllocatedBytes is what its devices held when it was written.
	AllocatedBytes int64 `json:"allocated_bytes"`
}

// What a file of the same process is.
const (
	WhatAfterOOM = "after_oom"
	WhatSnapshot = "snapshot"
	WhatTrace    = "trace"
)
