package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// demoSnapshot is the repository's demo OOM snapshot.
func demoSnapshot() string {
	return filepath.Join(repoRoot(), "testdata", "demo", "oom_snapshot.pickle")
}

// TestReportOutputWritesThrough: -o replaces a regular file atomically
// (keeping its permissions) and writes through anything else — a link
// stays a link (a FIFO a FIFO: TestReportOutputToFIFO) — where it renamed a
// temporary file over them (given /dev/null it replaced the device node).
func TestReportOutputWritesThrough(t *testing.T) {
	dir := t.TempDir()
	isPage := func(b []byte) bool { return bytes.HasPrefix(bytes.TrimSpace(b), []byte("<!DOCTYPE html>")) }

	regular := filepath.Join(dir, "old.html")
	os.WriteFile(regular, []byte("old"), 0o600)
	if code, _, stderr := runCLI(nil, "report", demoSnapshot(), "-o", regular); code != exitOK {
		t.Fatalf("regular file: exit %d: %s", code, stderr)
	}
	if st, _ := os.Lstat(regular); !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Errorf("regular file: mode %v, want a regular file with 0600 kept", st.Mode())
	}

	target := filepath.Join(dir, "target.html")
	os.WriteFile(target, []byte("old"), 0o644)
	link := filepath.Join(dir, "link.html")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(nil, "report", demoSnapshot(), "-o", link); code != exitOK {
		t.Fatalf("link: exit %d: %s", code, stderr)
	}
	if st, _ := os.Lstat(link); st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced by a %v", st.Mode())
	}
	if b, _ := os.ReadFile(target); !isPage(b) {
		t.Errorf("the link's target holds %.40q, not the report", b)
	}

	code, _, stderr := runCLI(nil, "report", demoSnapshot(), "-o", dir)
	if code != exitInput || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "is a directory") {
		t.Errorf("a folder: exit %d, stderr %q", code, stderr)
	}
}

// failingWriter fails every write as a closed or full stdout does.
type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// TestOutputWriteErrors: a closed stdout (EBADF) or a full disk (ENOSPC)
// ends every command in exit 2 with one line naming the failure, where a
// closed stdout exited 0 and write errors printed two lines.
func TestOutputWriteErrors(t *testing.T) {
	for _, errno := range []error{syscall.EBADF, syscall.ENOSPC, syscall.EPIPE} {
		for _, args := range [][]string{
			{"analyze", demoSnapshot()},
			{"analyze", "--format", "json", demoSnapshot()},
			{"info", demoSnapshot()},
			{"report", demoSnapshot(), "-o", "-"},
			{"diff", demoSnapshot(), demoSnapshot()},
			{"--help"},
		} {
			var stderr bytes.Buffer
			code := run(args, bytes.NewReader(nil), failingWriter{errno}, &stderr)
			if code != exitInput || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "cannot write the output: "+errno.Error()) {
				t.Errorf("%v with %v: exit %d, stderr %q", args, errno, code, stderr.String())
			}
		}
	}
}
