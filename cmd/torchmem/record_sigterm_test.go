//go:build unix

package main

import (
	"fmt"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestRecordSIGTERM: a SIGTERM that the program leaves unhandled (torchrun
// and batch schedulers stop jobs with it) makes the hook dump the snapshot
// and then end the process as the signal would have, and torchmem says so;
// a program's own SIGTERM handler, or a SIGTERM it ignores, is left as it
// is (the exit dump follows as usual).
func TestRecordSIGTERM(t *testing.T) {
	py := needPython(t)
	if signal.Ignored(syscall.SIGTERM) {
		t.Skip("SIGTERM is ignored here, and so in the command (as it should be)")
	}
	const wait = "print('ready', flush=True)\nsys.stdin.readline()\nprint('went on')\n"
	tests := []struct {
		name, before, after string
		code                int
		kind                string // what torchmem lists the snapshot as
		stdout              string
	}{
		{name: "unhandled: dumped, then ended by it", code: 128 + 15,
			kind: "on SIGTERM, before the signal ended the process", stdout: "ready\n"},
		{name: "the program's own handler", code: 43, kind: "at exit", stdout: "ready\ngot SIGTERM\n",
			after: "def h(s, f):\n    print('got SIGTERM')\n    sys.exit(43)\nsignal.signal(signal.SIGTERM, h)\n"},
		{name: "ignored by the program", code: 0, kind: "at exit", stdout: "ready\nwent on\n",
			before: "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newStandin(t)
			out := filepath.Join(t.TempDir(), "rec")
			script := writeScript(t, t.TempDir(), "train.py", "import os, signal, sys\n"+tc.before+
				"import torch\nprint('pid', os.getpid(), file=sys.stderr)\ntorch.cuda.init()\n"+tc.after+wait)
			p := startTorchmem(t, f.env, "record", "-o", out, "--", py, script)
			p.stdout.waitFor(t, "ready\n")
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if tc.code == 0 {
				p.stdin.Write([]byte("go\n"))
			}
			code := p.waitOpen(t)
			stderr := p.stderr.String()
			if code != tc.code || p.stdout.String() != tc.stdout {
				t.Fatalf("exit %d (want %d), stdout %q (want %q), stderr %q", code, tc.code, p.stdout, tc.stdout, stderr)
			}
			pid := pidOf(t, stderr)
			snap := fmt.Sprintf("snapshot_rank0_%d.pickle", pid)
			if got, want := dirFiles(t, out), []string{"report.html", snap}; !slices.Equal(got, want) {
				t.Errorf("files %q, want %q", got, want)
			}
			if n := len(find(f.calls(t), "torch.cuda.memory._snapshot")); n != 1 {
				t.Errorf("%d snapshots taken, want 1", n)
			}
			want := []string{fileLine(snap, tc.kind+" (analysed above)")}
			if tc.code == 128+15 {
				want = append(want, "torchmem: the command was killed by SIGTERM (exit status 143, 128+15 as shells report it); files in ")
			}
			for _, w := range want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if !strings.Contains(stderr, analyzeText(t, filepath.Join(out, snap))) {
				t.Errorf("stderr lacks the analysis of %s", snap)
			}
		})
	}
}
