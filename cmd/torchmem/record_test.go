//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// The tests of torchmem record run real CPython on real scripts, through
// torchmem started as a process of its own (TestMain), in a session of its
// own (no controlling terminal, so every signal it gets is passed on).

// needPython returns the python3 to run, or skips when there is none (CI
// sets TORCHMEM_REQUIRE_PYTHON=1 to fail instead).
func needPython(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("TORCHMEM_REQUIRE_PYTHON") != "" {
			t.Fatalf("python3 is required: %v", err)
		}
		t.Skip("no python3")
	}
	return py
}

// lockedBuffer is a buffer that a process writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the buffer holds s, for as long as the test may run
// (snapshottest.Context: no fixed time that a loaded machine could exceed).
func (b *lockedBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	ctx := st.Context(t)
	for !strings.Contains(b.String(), s) {
		select {
		case <-ctx.Done():
			t.Fatalf("no %q before the test's deadline; output so far %q", s, b.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// torchmemProc is torchmem running in a session of its own.
type torchmemProc struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr *lockedBuffer
}

// startTorchmem starts torchmem with args, the test's environment plus env.
func startTorchmem(t *testing.T, env []string, args ...string) *torchmemProc {
	t.Helper()
	p := &torchmemProc{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}}
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(append(os.Environ(), "TORCHMEM_TEST_CLI=1"), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// wait closes torchmem's stdin and returns its exit status.
func (p *torchmemProc) wait(t *testing.T) int {
	t.Helper()
	p.stdin.Close()
	return p.waitOpen(t)
}

// waitOpen returns torchmem's exit status, its stdin left open (a command
// reading it ends of its own accord or of a signal, not of an end of file).
func (p *torchmemProc) waitOpen(t *testing.T) int {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-st.Context(t).Done():
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // torchmem's session: it and the command
		t.Fatalf("torchmem did not end before the test's deadline; stdout %q stderr %q", p.stdout, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

// runTorchmem runs torchmem to the end with stdin and returns its exit
// status, stdout and stderr.
func runTorchmem(t *testing.T, env []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	p := startTorchmem(t, env, args...)
	if _, err := io.WriteString(p.stdin, stdin); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t)
	return code, p.stdout.String(), p.stderr.String()
}

// writeScript writes a Python script into dir and returns its path.
func writeScript(t *testing.T, dir, name, src string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const nothingNoTorch = "torchmem: nothing was recorded: the program never imported torch\n"

// TestRecordRunsTheCommandAsItIs: the command's output, input, arguments and
// exit status are its own; torchmem adds one line on stderr when nothing was
// recorded.
func TestRecordRunsTheCommandAsItIs(t *testing.T) {
	py := needPython(t)
	dir := t.TempDir()
	args := []string{"a b", "", "it's", "--output", "-o", "ünï ☃", "$HOME", "*", "tab\there"}
	wantArgs, _ := json.Marshal(args)
	noHook := "torchmem: nothing was recorded: no Python process ran the hook (not Python, or python -E, -I or -S)\n"
	cases := []struct {
		name         string
		script       string
		cmd          []string // instead of python3 script
		stdin        string
		code         int
		stdout       string
		stderrPrefix string
		stderrHas    string
	}{
		{name: "exit 0, both streams", script: "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\n",
			stdout: "to stdout\n", stderrPrefix: "to stderr\n" + nothingNoTorch},
		{name: "exit 3", script: "import sys\nprint('bye')\nsys.exit(3)\n", code: 3, stdout: "bye\n", stderrPrefix: nothingNoTorch},
		{name: "killed by SIGKILL", script: "import os, signal\nprint('dying', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n",
			code: 128 + 9, stdout: "dying\n",
			stderrPrefix: "torchmem: the command was killed by SIGKILL (exit status 137, 128+9 as shells report it)\n" + nothingNoTorch},
		{name: "arguments kept", script: "import sys, json\nprint(json.dumps(sys.argv[1:], ensure_ascii=False, separators=(',', ':')))\n",
			stdout: string(wantArgs) + "\n", stderrPrefix: nothingNoTorch},
		{name: "stdin passed", script: "import sys\nprint(sys.stdin.read().upper(), end='')\n",
			stdin: "hello\nworld\n", stdout: "HELLO\nWORLD\n", stderrPrefix: nothingNoTorch},
		{name: "python -I skips the hook", cmd: []string{py, "-I", "-c", "print('isolated')"},
			stdout: "isolated\n", stderrPrefix: noHook},
		{name: "not Python", cmd: []string{"sh", "-c", "echo shell; exit 5"}, code: 5, stdout: "shell\n", stderrPrefix: noHook},
		{name: "not found", cmd: []string{filepath.Join(dir, "no-such-program")}, code: 127,
			stderrPrefix: "torchmem: record: cannot run " + filepath.Join(dir, "no-such-program") + ": no such file or directory\n"},
		{name: "not executable", cmd: []string{writeScript(t, dir, "plain.txt", "text")}, code: 126,
			stderrPrefix: "torchmem: record: cannot run " + filepath.Join(dir, "plain.txt") + ": permission denied\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := c.cmd
			if cmd == nil {
				cmd = append([]string{py, writeScript(t, t.TempDir(), "script.py", c.script)}, args...)
			}
			out := filepath.Join(t.TempDir(), "rec")
			code, stdout, stderr := runTorchmem(t, nil, c.stdin, append([]string{"record", "-o", out, "--"}, cmd...)...)
			if code != c.code || stdout != c.stdout || !strings.HasPrefix(stderr, c.stderrPrefix) || !strings.Contains(stderr, c.stderrHas) {
				t.Errorf("exit %d (want %d)\nstdout %q\nwant   %q\nstderr %q\nwant   %q…%q", code, c.code, stdout, c.stdout, stderr, c.stderrPrefix, c.stderrHas)
			}
			if strings.Count(stderr, "torchmem:") > 2 {
				t.Errorf("more than the expected lines from torchmem: %q", stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was created and left empty", out)
			}
		})
	}
}

// TestRecordPythonPath: the hook's folder goes first on PYTHONPATH, the
// user's entries are kept after it, the program's sys.path does not show the
// hook's folder, and the user's own sitecustomize still runs.
func TestRecordPythonPath(t *testing.T) {
	py := needPython(t)
	user := t.TempDir()
	writeScript(t, user, "sitecustomize.py", "import builtins\nbuiltins.USER_SITECUSTOMIZE_RAN = True\n")
	other := t.TempDir()
	script := writeScript(t, t.TempDir(), "show.py", `import builtins, json, os, sys
print(json.dumps({
    "PYTHONPATH": os.environ.get("PYTHONPATH"),
    "sys.path": sys.path,
    "user sitecustomize ran": getattr(builtins, "USER_SITECUSTOMIZE_RAN", False),
    "sitecustomize": getattr(sys.modules.get("sitecustomize"), "__file__", None),
}))
`)
	for _, c := range []struct {
		name, pythonpath string
		userSite         bool
	}{
		{"user PYTHONPATH with a sitecustomize", user + string(os.PathListSeparator) + other, true},
		{"no PYTHONPATH", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := []string{"PYTHONPATH=" + c.pythonpath}
			code, stdout, stderr := runTorchmem(t, env, "", "record", "-o", filepath.Join(t.TempDir(), "rec"), "--", py, script)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var got struct {
				PythonPath    string   `json:"PYTHONPATH"`
				SysPath       []string `json:"sys.path"`
				UserRan       bool     `json:"user sitecustomize ran"`
				Sitecustomize *string  `json:"sitecustomize"`
			}
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("%v: %q", err, stdout)
			}
			hook, rest, _ := strings.Cut(got.PythonPath, string(os.PathListSeparator))
			if !strings.HasPrefix(filepath.Base(hook), "torchmem-hook-") || rest != c.pythonpath {
				t.Errorf("PYTHONPATH %q: want torchmem's hook folder, then %q", got.PythonPath, c.pythonpath)
			}
			for _, p := range got.SysPath {
				if p == hook {
					t.Errorf("the hook's folder is left on sys.path: %q", got.SysPath)
				}
			}
			if c.userSite {
				if !slices.Contains(got.SysPath, user) || !slices.Contains(got.SysPath, other) {
					t.Errorf("sys.path %q lacks the user's entries", got.SysPath)
				}
				if !got.UserRan || got.Sitecustomize == nil || *got.Sitecustomize != filepath.Join(user, "sitecustomize.py") {
					t.Errorf("the user's sitecustomize: ran %v, module %v", got.UserRan, got.Sitecustomize)
				}
			} else if got.UserRan {
				t.Errorf("a sitecustomize ran that nobody wrote")
			}
			if _, err := os.Stat(hook); err == nil {
				t.Errorf("the hook's folder %s is left behind", hook)
			}
		})
	}
}
