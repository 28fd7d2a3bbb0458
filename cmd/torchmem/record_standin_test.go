//go:build unix

package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// CI has no GPU and no PyTorch, so these tests run the hook's calls into
// torch against a stand-in: a small package named torch
// (testdata/record/standin, copied by the test into a temp folder and put on
// PYTHONPATH) that records every call the hook makes into a log, initialises
// CUDA lazily as PyTorch does, and calls the out-of-memory observers before
// raising OutOfMemoryError. The snapshots it returns are pickles made by
// torchmem's own writer (snapshottest), which the hook pickles again with
// Python's pickle, as it would torch's dict; torchmem then analyses them.

const oomScript = `import os, sys, torch
print("pid", os.getpid())
torch.cuda.init()  # the program's first use of CUDA
try:
    torch.cuda._standin_oom(1610612736)
except torch.cuda.OutOfMemoryError:
    print("files when the error reached the program:", sorted(os.listdir(sys.argv[1])))
    raise
`

// TestRecordOOMWithStandin: with the string API of torch >= 2.1, recording
// starts when the program first initialises CUDA (not at import), the OOM
// observer writes the snapshot before the error reaches the program, and
// torchmem analyses that snapshot (what it prints and report.html are what
// analyze and report say of it), then exits with the program's status.
func TestRecordOOMWithStandin(t *testing.T) {
	py := needPython(t)
	f := newStandin(t)
	out := filepath.Join(t.TempDir(), "rec")
	script := writeScript(t, t.TempDir(), "train.py", oomScript)
	code, stdout, stderr := runTorchmem(t, append(f.env, "TORCHMEM_STANDIN_API=string"), "",
		"record", "-o", out, "--max-entries", "5000", "--stacks", "all", "--", py, script, out)
	if code != 1 || !strings.Contains(stderr, "torch.cuda.OutOfMemoryError: CUDA out of memory") {
		t.Fatalf("exit %d, want 1 (the uncaught OOM); stderr %q", code, stderr)
	}
	pid := pidOf(t, stdout)
	oomName := fmt.Sprintf("oom_snapshot_rank0_%d.pickle", pid)
	exitName := fmt.Sprintf("snapshot_rank0_%d.pickle", pid)
	if want := fmt.Sprintf("files when the error reached the program: ['%s']\n", oomName); !strings.Contains(stdout, want) {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	if got, want := dirFiles(t, out), []string{oomName, "report.html", exitName}; !slices.Equal(got, want) {
		t.Errorf("files %q, want %q", got, want)
	}

	calls := f.calls(t)
	wantOrder := []string{"import torch", "torch.cuda._lazy_call", "torch.cuda._lazy_init",
		"torch.cuda.memory._record_memory_history", "_cuda_attach_out_of_memory_observer",
		"torch.cuda.memory._snapshot", "torch.cuda.memory._snapshot"}
	if got := names(calls); !slices.Equal(got, wantOrder) {
		t.Errorf("calls %q\nwant  %q", got, wantOrder)
	}
	if rec := find(calls, "torch.cuda.memory._record_memory_history"); len(rec) == 1 {
		if got, want := jsonString([]any{rec[0].Args, rec[0].Kwargs}), `[["all"],{"context":"all","max_entries":5000,"stacks":"all"}]`; got != want {
			t.Errorf("_record_memory_history%s, want %s", got, want)
		}
		if rec[0].CudaInitialized {
			t.Errorf("recording started after CUDA's initialisation finished, not within it")
		}
	}

	// What torchmem printed and wrote is the analysis of the OOM snapshot,
	// which says what analysing the writer's own file says.
	oomPath := filepath.Join(out, oomName)
	want := analyzeText(t, oomPath)
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks the analysis of %s:\n%s\nstderr:\n%s", oomName, want, stderr)
	}
	if a, b := analyzeJSON(t, oomPath), analyzeJSON(t, f.oomSnapshot); a != b {
		t.Errorf("the hook's OOM snapshot does not analyse as the stand-in's pickle does:\n%s\n%s", a, b)
	}
	_, page, _ := runCLI(nil, "report", "-o", "-", oomPath)
	if got, err := os.ReadFile(filepath.Join(out, "report.html")); err != nil || string(got) != page {
		t.Errorf("report.html (%d bytes, %v) is not torchmem report of %s (%d bytes)", len(got), err, oomName, len(page))
	}
	for _, line := range []string{
		"torchmem: the command exited with status 1; files in " + out + ":\n",
		fileLine(oomName, "out of memory, dumped before the error was raised (analysed above)"),
		fileLine(exitName, "at exit"),
	} {
		if !strings.Contains(stderr, line) {
			t.Errorf("stderr lacks %q:\n%s", line, stderr)
		}
	}
}

// TestRecordWithStandin: the other torch versions and situations.
func TestRecordWithStandin(t *testing.T) {
	py := needPython(t)
	initScript := "import os, torch\nprint('pid', os.getpid())\ntorch.cuda.init()\n"
	importScript := "import os, torch\nprint('pid', os.getpid())\n"
	cases := []struct {
		name   string
		env    []string
		flags  []string
		script string
		// files expected in DIR, with %d for the program's pid
		files []string
		// a call expected, with its arguments as JSON [args, kwargs]
		call, callArgs string
		// calls that must not happen
		never []string
		code  int // the command's exit status
		// the whole of stderr when nothing is recorded, else a part of it
		stderr func(dir string, pid int) string
	}{
		{
			name: "torch 2.0 legacy API, RANK", env: []string{"TORCHMEM_STANDIN_API=legacy", "RANK=3"},
			script: initScript, files: []string{"report.html", "snapshot_rank3_%d.pickle"},
			call: "torch.cuda.memory._record_memory_history",
			callArgs: `[[true],{"record_context":true,"record_context_cpp":false,` +
				`"trace_alloc_max_entries":100000,"trace_alloc_record_context":true}]`,
			stderr: func(string, int) string { return "torchmem: the command exited with status 0; files in " },
		},
		{
			name: "torch 1.13: live blocks' stacks only", env: []string{"TORCHMEM_STANDIN_API=state"},
			script: initScript, files: []string{"report.html", "snapshot_rank0_%d.pickle"},
			call: "torch.cuda.memory._record_memory_history", callArgs: `[[true],{"device":null}]`,
			stderr: func(string, int) string { return "torchmem: the command exited with status 0; files in " },
		},
		{
			name: "LOCAL_RANK, --no-analyze", env: []string{"LOCAL_RANK=2"}, flags: []string{"--no-analyze"},
			script: initScript, files: []string{"snapshot_rank2_%d.pickle"},
			call: "torch.cuda.memory._record_memory_history", callArgs: `[["all"],{"context":"all","max_entries":100000,"stacks":"python"}]`,
			stderr: func(dir string, pid int) string {
				return "torchmem: the command exited with status 0; files in " + dir + ":\n" +
					fileLine(fmt.Sprintf("snapshot_rank2_%d.pickle", pid), "at exit")
			},
		},
		{
			name: "no CUDA device", env: []string{"TORCHMEM_STANDIN_CUDA=0"}, script: importScript,
			never: []string{"torch.cuda.memory._record_memory_history", "torch.cuda._lazy_init"},
			stderr: func(string, int) string {
				return "torchmem: nothing was recorded: torch 2.5.1+standin finds no CUDA device (is_available() is False)\n"
			},
		},
		{
			name: "CPU-only torch", env: []string{"TORCHMEM_STANDIN_CUDA=none"}, script: importScript,
			never: []string{"torch.cuda.memory._record_memory_history", "torch.cuda._lazy_init"},
			stderr: func(string, int) string {
				return "torchmem: nothing was recorded: torch 2.5.1+standin is built without CUDA\n"
			},
		},
		{
			name: "CUDA never used", script: importScript,
			never:  []string{"torch.cuda.memory._record_memory_history", "torch.cuda._lazy_init"},
			stderr: func(string, int) string { return "torchmem: nothing was recorded: the program never used CUDA\n" },
		},
		{
			name: "killed while recording", script: initScript + "import signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
			code: 128 + 9, call: "torch.cuda.memory._record_memory_history",
			callArgs: `[["all"],{"context":"all","max_entries":100000,"stacks":"python"}]`,
			stderr: func(string, int) string {
				return "torchmem: the command was killed by SIGKILL (exit status 137, 128+9 as shells report it)\n" +
					"torchmem: nothing was recorded: killed before its exit dump, by a signal the hook cannot catch such as SIGKILL (SIGUSR1 dumps while it runs)\n"
			},
		},
		{
			name: "torch never imported", script: "import os, sys\nprint('pid', os.getpid())\nprint('torch' in sys.modules)\n",
			never: []string{"import torch"}, stderr: func(string, int) string { return nothingNoTorch },
		},
		{
			name: "--trace", flags: []string{"--trace"},
			script: initScript + "opt = torch.optim.Optimizer()\nfor _ in range(6):\n    opt.step()\n",
			files:  []string{"report.html", "snapshot_rank0_%d.pickle", "trace_rank0_%d.json.gz"},
			call:   "torch.profiler.profile", callArgs: `[[],{"activities":["CPU","CUDA"],"profile_memory":true,"record_shapes":true,"with_stack":true}]`,
			never: []string{"profile.stop"},
			stderr: func(_ string, pid int) string {
				return fileLine(fmt.Sprintf("trace_rank0_%d.json.gz", pid), "profiler trace")
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newStandin(t)
			out := filepath.Join(t.TempDir(), "rec")
			script := writeScript(t, t.TempDir(), "train.py", c.script)
			args := append(append([]string{"record", "-o", out}, c.flags...), "--", py, script)
			code, stdout, stderr := runTorchmem(t, append(f.env, c.env...), "", args...)
			if code != c.code {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			pid := pidOf(t, stdout)
			var want []string
			for _, name := range c.files {
				if strings.Contains(name, "%d") {
					name = fmt.Sprintf(name, pid)
				}
				want = append(want, name)
			}
			if got := dirFiles(t, out); !slices.Equal(got, want) {
				t.Errorf("files %q, want %q", got, want)
			}
			wantErr := c.stderr(out, pid)
			if len(c.files) == 0 && stderr != wantErr || !strings.Contains(stderr, wantErr) {
				t.Errorf("stderr %q\nwant   %q", stderr, wantErr)
			}
			calls := f.calls(t)
			if c.call != "" {
				got := find(calls, c.call)
				if len(got) != 1 || jsonString([]any{got[0].Args, got[0].Kwargs}) != c.callArgs {
					t.Errorf("%s: %s, want once with %s", c.call, jsonString(got), c.callArgs)
				}
			}
			for _, name := range c.never {
				if len(find(calls, name)) > 0 {
					t.Errorf("%s was called: %q", name, names(calls))
				}
			}
			if slices.Contains(c.files, "report.html") {
				for _, name := range want {
					if strings.HasPrefix(name, "snapshot_") && !strings.Contains(stderr, analyzeText(t, filepath.Join(out, name))) {
						t.Errorf("stderr lacks the analysis of %s:\n%s", name, stderr)
					}
				}
			}
		})
	}
}

// TestRecordTraceSchedule: with --trace, the profiler starts after the first
// optimizer step (which builds the optimizer's state), warms up one step and
// records three, and the trace it exports is read by torchmem.
func TestRecordTraceSchedule(t *testing.T) {
	py := needPython(t)
	f := newStandin(t)
	out := filepath.Join(t.TempDir(), "rec")
	script := writeScript(t, t.TempDir(), "train.py", `import os, torch
print("pid", os.getpid())
torch.cuda.init()
opt = torch.optim.Optimizer()
for _ in range(7):
    opt.step()
`)
	code, stdout, stderr := runTorchmem(t, f.env, "", "record", "-o", out, "--trace", "--no-analyze", "--", py, script)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	trace := filepath.Join(out, fmt.Sprintf("trace_rank0_%d.json.gz", pidOf(t, stdout)))
	var seq []string
	for _, c := range f.calls(t) {
		switch c.Call {
		case "Optimizer.step", "profile.start", "profile.step", "profile.export_chrome_trace", "profile.stop":
			seq = append(seq, c.Call)
		case "torch.profiler.schedule":
			if got := jsonString(c.Kwargs); got != `{"active":3,"repeat":1,"wait":0,"warmup":1}` {
				t.Errorf("schedule %s", got)
			}
		}
	}
	want := []string{"Optimizer.step", "profile.start"}
	for i := 0; i < 4; i++ {
		want = append(want, "Optimizer.step", "profile.step")
	}
	want = append(want, "profile.export_chrome_trace", "Optimizer.step", "Optimizer.step")
	if !slices.Equal(seq, want) {
		t.Errorf("calls %q\nwant  %q", seq, want)
	}
	code, info, errOut := runCLI(nil, "info", trace)
	if code != exitOK || !strings.Contains(info, "format      chrome-trace, gzip") {
		t.Errorf("info %s: exit %d %s%s", trace, code, info, errOut)
	}
	if code, _, errOut := runCLI(nil, "analyze", trace); code != exitOK {
		t.Errorf("analyze %s: exit %d %s", trace, code, errOut)
	}
}

// TestRecordChildProcesses: processes the command starts (torchrun's
// workers) load the hook too; each rank writes its own snapshot, and the
// ranks are rolled up (TestRecordRollsUpRanks has the roll-up itself).
func TestRecordChildProcesses(t *testing.T) {
	py := needPython(t)
	f := newStandin(t)
	out := filepath.Join(t.TempDir(), "rec")
	worker := writeScript(t, t.TempDir(), "worker.py", "import os, torch\nprint('pid', os.getpid(), os.environ['RANK'])\ntorch.cuda.init()\n")
	launcher := writeScript(t, t.TempDir(), "launch.py", `import os, subprocess, sys
for rank in ("1", "0"):
    subprocess.run([sys.executable, sys.argv[1]], env=dict(os.environ, RANK=rank), check=True)
`)
	code, stdout, stderr := runTorchmem(t, f.env, "", "record", "-o", out, "--", py, launcher, worker)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var want []string
	pids := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var pid int
		var rank string
		if _, err := fmt.Sscanf(line, "pid %d %s", &pid, &rank); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		pids[rank] = pid
		want = append(want, fmt.Sprintf("snapshot_rank%s_%d.pickle", rank, pid), fmt.Sprintf("report_rank%s_%d.html", rank, pid))
	}
	want = append(want, "report.html")
	sort.Strings(want)
	if got := dirFiles(t, out); !slices.Equal(got, want) {
		t.Errorf("files %q, want %q", got, want)
	}
	for rank, pid := range pids {
		if line := fileLine(fmt.Sprintf("snapshot_rank%s_%d.pickle", rank, pid), "at exit (rank "+rank+" in the roll-up above)"); !strings.Contains(stderr, line) {
			t.Errorf("stderr lacks %q:\n%s", line, stderr)
		}
	}
}

// TestRecordSignals: signals sent to torchmem reach the command, which
// handles them or dies of them as it would alone; SIGUSR1 makes every
// recording process dump its snapshot while it runs.
func TestRecordSignals(t *testing.T) {
	py := needPython(t)
	wait := "import sys\nprint('ready', flush=True)\nsys.stdin.readline()\n"
	cases := []struct {
		name   string
		script string
		sig    syscall.Signal
		code   int
		stdout string
		stderr string
	}{
		{name: "SIGINT handled", sig: syscall.SIGINT, code: 42, stdout: "ready\ngot SIGINT\n",
			script: "import sys\ntry:\n    " + strings.ReplaceAll(wait, "\n", "\n    ") + "\nexcept KeyboardInterrupt:\n    print('got SIGINT')\n    sys.exit(42)\n"},
		{name: "SIGTERM handled", sig: syscall.SIGTERM, code: 43, stdout: "ready\ngot SIGTERM\n",
			script: "import signal, sys\ndef h(s, f):\n    print('got SIGTERM')\n    sys.exit(43)\nsignal.signal(signal.SIGTERM, h)\n" + wait},
		{name: "SIGTERM kills", sig: syscall.SIGTERM, code: 128 + 15, stdout: "ready\n", script: wait,
			stderr: "torchmem: the command was killed by SIGTERM (exit status 143, 128+15 as shells report it)\n" + nothingNoTorch},
		{name: "SIGHUP kills", sig: syscall.SIGHUP, code: 128 + 1, stdout: "ready\n", script: wait,
			stderr: "torchmem: the command was killed by SIGHUP (exit status 129, 128+1 as shells report it)\n" + nothingNoTorch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if signal.Ignored(c.sig) {
				t.Skipf("%v is ignored here, and so in the command (as it should be)", c.sig)
			}
			script := writeScript(t, t.TempDir(), "wait.py", c.script)
			p := startTorchmem(t, nil, "record", "-o", filepath.Join(t.TempDir(), "rec"), "--", py, script)
			p.stdout.waitFor(t, "ready\n")
			if err := p.cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			code := p.waitOpen(t)
			if code != c.code || p.stdout.String() != c.stdout || c.stderr != "" && p.stderr.String() != c.stderr {
				t.Errorf("exit %d (want %d), stdout %q (want %q), stderr %q (want %q)",
					code, c.code, p.stdout, c.stdout, p.stderr, c.stderr)
			}
		})
	}

	t.Run("SIGUSR1 before recording", func(t *testing.T) {
		script := writeScript(t, t.TempDir(), "wait.py", wait+"print('went on')\n")
		p := startTorchmem(t, nil, "record", "-o", filepath.Join(t.TempDir(), "rec"), "--", py, script)
		p.stdout.waitFor(t, "ready\n")
		if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		p.stderr.waitFor(t, "torchmem: SIGUSR1: no process is recording yet; nothing to dump\n")
		if _, err := p.stdin.Write([]byte("go\n")); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(t); code != 0 || p.stdout.String() != "ready\nwent on\n" {
			t.Errorf("exit %d, stdout %q: the command should go on", code, p.stdout)
		}
	})

	t.Run("SIGUSR1 dumps while running", func(t *testing.T) {
		f := newStandin(t)
		out := filepath.Join(t.TempDir(), "rec")
		script := writeScript(t, t.TempDir(), "train.py", `import os, sys, time, torch
print("pid", os.getpid())
torch.cuda.init()
path = os.path.join(sys.argv[1], "snapshot_rank0_%d.pickle" % os.getpid())
print("ready", flush=True)
while not os.path.exists(path):  # as long as it takes; the test's deadline ends it
    time.sleep(0.01)
print("dumped while running")
`)
		p := startTorchmem(t, f.env, "record", "-o", out, "--no-analyze", "--", py, script, out)
		p.stdout.waitFor(t, "ready\n")
		if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		if code := p.waitOpen(t); code != 0 || !strings.Contains(p.stdout.String(), "dumped while running\n") {
			t.Errorf("exit %d, stdout %q, stderr %q", code, p.stdout, p.stderr)
		}
		if n := len(find(f.calls(t), "torch.cuda.memory._snapshot")); n != 2 {
			t.Errorf("%d snapshots taken, want 2 (SIGUSR1, exit)", n)
		}
	})
}
