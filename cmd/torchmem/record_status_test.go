package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeStatus writes hook status lines as hook/sitecustomize.py does: one
// file per process.
func writeStatus(t *testing.T, state string, pid int, lines ...string) {
	t.Helper()
	path := filepath.Join(state, fmt.Sprintf("status-%d.jsonl", pid))
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHookStatusFiles: the file analysed first is the first OOM snapshot
// (by time, whatever its rank), then snapshots by rank, then traces; a file
// dumped twice is listed once, as its last dump; a file gone is not listed;
// a torn last line (a process killed while writing) is skipped.
func TestHookStatusFiles(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	file := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dump := func(pid int, time float64, kind, path string, rank int) string {
		return fmt.Sprintf(`{"event": "dump", "pid": %d, "time": %v, "kind": %q, "path": %q, "rank": %d}`, pid, time, kind, path, rank)
	}
	writeStatus(t, state, 10,
		`{"event": "python", "pid": 10, "time": 1}`,
		dump(10, 5, "signal", file("snapshot_rank0_10.pickle"), 0),
		dump(10, 9, "exit", filepath.Join(dir, "snapshot_rank0_10.pickle"), 0),
		dump(10, 8, "trace", file("trace_rank0_10.json.gz"), 0),
		`{"event": "dump", "pid": 10, "ti`)
	writeStatus(t, state, 11,
		dump(11, 7, "oom", file("oom_snapshot_rank1_11.pickle"), 1),
		dump(11, 8, "exit", file("snapshot_rank1_11.pickle"), 1))
	writeStatus(t, state, 12,
		dump(12, 7.5, "oom", file("oom_snapshot_rank0_12.pickle"), 0),
		dump(12, 8, "exit", filepath.Join(dir, "gone.pickle"), 0))

	var got []string
	for _, f := range readHookStatus(state).files() {
		got = append(got, filepath.Base(f.path)+" "+f.kind)
	}
	want := []string{"oom_snapshot_rank1_11.pickle oom", "oom_snapshot_rank0_12.pickle oom",
		"snapshot_rank0_10.pickle exit", "snapshot_rank1_11.pickle exit", "trace_rank0_10.json.gz trace"}
	if !slices.Equal(got, want) {
		t.Errorf("files %q\nwant  %q", got, want)
	}
}

// TestHookStatusUsr1Pids: SIGUSR1 goes to processes whose hook handles it
// and that have not ended (their exit handler ran).
func TestHookStatusUsr1Pids(t *testing.T) {
	state := t.TempDir()
	writeStatus(t, state, 20, `{"event": "sigusr1", "pid": 20, "time": 1}`)
	writeStatus(t, state, 21, `{"event": "sigusr1", "pid": 21, "time": 1}`,
		`{"event": "dump", "pid": 21, "time": 2, "kind": "exit", "path": "/x"}`)
	writeStatus(t, state, 22, `{"event": "sigusr1", "pid": 22, "time": 1}`,
		`{"event": "not_recording", "pid": 22, "time": 2, "why": "w"}`)
	writeStatus(t, state, 23, `{"event": "python", "pid": 23, "time": 1}`)
	writeStatus(t, state, 24, `{"event": "sigusr1", "pid": 24, "time": 1}`,
		`{"event": "dump", "pid": 24, "time": 2, "kind": "signal", "path": "/y"}`)
	if got := readHookStatus(state).usr1Pids(); !slices.Equal(got, []int{20, 24}) {
		t.Errorf("pids %v, want [20 24]", got)
	}
}
