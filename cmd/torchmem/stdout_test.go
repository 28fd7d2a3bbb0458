//go:build unix

package main

import (
	"io"
	"os"
	"strings"
	"testing"
)

// TestClosedStdoutFails runs torchmem (this test binary, as main would run
// it) with its standard output closed: a command with output exits 2 with
// one line, where it exited 0 (the Go runtime puts /dev/null there); one
// without, report -o FILE, succeeds; a shell's >/dev/null is not closed.
func TestClosedStdoutFails(t *testing.T) {
	if os.Getenv("TORCHMEM_TEST_MAIN") == "1" {
		args := strings.Split(os.Getenv("TORCHMEM_TEST_ARGS"), "\x1f")
		os.Exit(run(args, os.Stdin, standardOutput(), os.Stderr))
	}
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer devNull.Close()
	out := t.TempDir() + "/r.html"
	for _, c := range []struct {
		name   string
		stdout *os.File // nil: closed
		args   []string
		code   int
	}{
		{"closed, analyze", nil, []string{"analyze", demoSnapshot()}, exitInput},
		{"closed, info", nil, []string{"info", demoSnapshot()}, exitInput},
		{"closed, report -o FILE", nil, []string{"report", demoSnapshot(), "-o", out}, exitOK},
		{">/dev/null, analyze", devNull, []string{"analyze", demoSnapshot()}, exitOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			p, err := os.StartProcess(os.Args[0], []string{os.Args[0], "-test.run=^TestClosedStdoutFails$"}, &os.ProcAttr{
				Env:   append(os.Environ(), "TORCHMEM_TEST_MAIN=1", "TORCHMEM_TEST_ARGS="+strings.Join(c.args, "\x1f")),
				Files: []*os.File{os.Stdin, c.stdout, w},
			})
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			stderr, _ := io.ReadAll(r)
			st, err := p.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if st.ExitCode() != c.code {
				t.Errorf("exit %d, want %d; stderr %q", st.ExitCode(), c.code, stderr)
			}
			if c.code == exitInput && (strings.Count(string(stderr), "\n") != 1 || !strings.Contains(string(stderr), "standard output is closed")) {
				t.Errorf("stderr %q, want one line", stderr)
			}
		})
	}
}
