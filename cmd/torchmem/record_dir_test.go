//go:build unix

package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// unprivileged returns a torchmem that runs as nobody, and a folder nobody
// may enter, when the tests run as root (to whom every folder is
// writable); otherwise the test's own binary and a temporary folder. (Run
// as nobody, torchmem is refused before it would run the command: the
// command may be a python3 that nobody cannot run.)
func unprivileged(t *testing.T) (exe, base string, cred *syscall.Credential) {
	t.Helper()
	if os.Geteuid() != 0 {
		return os.Args[0], t.TempDir(), nil
	}
	base, err := os.MkdirTemp("", "torchmem-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	exe = filepath.Join(base, "torchmem.test")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe, base, &syscall.Credential{Uid: 65534, Gid: 65534}
}

// TestRecordOutputChecked: -o is checked before the command starts: an
// existing file, a read-only folder, a link to a folder elsewhere, a folder
// holding a link or files record did not write, a path below a file are
// refused with one line and exit status 2, and the command never runs; a
// new folder, an empty one and one an earlier recording wrote are taken.
func TestRecordOutputChecked(t *testing.T) {
	py := needPython(t)
	exe, base, cred := unprivileged(t)
	ran := filepath.Join(base, "ran")
	if err := os.Mkdir(ran, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(ran, 0o777)
	script := filepath.Join(base, "train.py")
	if err := os.WriteFile(script, []byte("import os, sys\nopen(os.path.join(sys.argv[1], 'started'), 'w').close()\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	file := func(dir, name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("precious\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	elsewhere := mk("elsewhere", 0o777)
	link := filepath.Join(base, "link")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	planted := mk("planted", 0o777)
	if err := os.Symlink(file(elsewhere, "target"), filepath.Join(planted, "report.html")); err != nil {
		t.Fatal(err)
	}
	foreign := mk("foreign", 0o777)
	file(foreign, "train.py")
	own := mk("own", 0o777)
	for _, n := range []string{"snapshot_rank0_11.pickle", "oom_snapshot_rank1_12.pickle", "trace_rank0_11.json.gz", "report.html", "report_rank1_12.html"} {
		file(own, n)
	}

	refused := []struct {
		name, dir, why string
	}{
		{"an existing file", file(base, "notes.txt"), "exists and is not a folder; name a new or empty folder"},
		{"a read-only folder", mk("readonly", 0o555), "cannot be written: permission denied"},
		{"a link out of the folder", link, "is a symbolic link (to " + elsewhere + "); name the folder itself"},
		{"a folder holding a link", planted, "holds a symbolic link, report.html; name a new or empty folder"},
		{"a folder holding other files", foreign, "holds train.py, which torchmem record did not write; name a new or empty folder"},
		{"below a file", filepath.Join(base, "notes.txt", "run"), "not a directory"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, stdout, stderr := runAs(t, exe, cred, "record", "-o", tc.dir, "--", py, script, ran)
			took := time.Since(start)
			want := fmt.Sprintf("torchmem: record: -o %s: %s\n", tc.dir, tc.why)
			if code != exitInput || stdout != "" || stderr != want {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, want)
			}
			if _, err := os.Stat(filepath.Join(ran, "started")); err == nil {
				t.Errorf("the command ran")
			}
			t.Logf("refused in %v (the process started and ended)", took)
		})
	}
	if data, _ := os.ReadFile(filepath.Join(elsewhere, "target")); string(data) != "precious\n" {
		t.Errorf("the planted link's target was written: %q", data)
	}

	for _, tc := range []struct{ name, dir string }{
		{"a new folder", filepath.Join(mk("new", 0o777), "run")},
		{"an empty folder", mk("empty", 0o777)},
		{"an earlier recording's folder", own},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(filepath.Join(ran, "started"))
			code, _, stderr := runAs(t, os.Args[0], nil, "record", "-o", tc.dir, "--", py, script, ran)
			if _, err := os.Stat(filepath.Join(ran, "started")); code != exitOK || err != nil {
				t.Errorf("exit %d (%s), started: %v; want the command run", code, stderr, err)
			}
		})
	}
}

// runAs runs exe (torchmem) with args, as cred when not nil, in a session of
// its own, and returns its exit status, stdout and stderr.
func runAs(t *testing.T, exe string, cred *syscall.Credential, args ...string) (int, string, string) {
	t.Helper()
	c := exec.Command(exe, args...)
	c.Env = append(os.Environ(), "TORCHMEM_TEST_CLI=1")
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	c.Dir = filepath.Dir(exe)
	var stdout, stderr strings.Builder
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return c.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// TestRecordWritesNoLinks: links planted in the folder while the command
// runs — at report.html, at the snapshot's name, at the name the hook used
// for its temporary file — are replaced by the files, never written
// through: their targets stay as they were.
func TestRecordWritesNoLinks(t *testing.T) {
	py := needPython(t)
	f := newStandin(t)
	out := filepath.Join(t.TempDir(), "rec")
	outside := t.TempDir()
	script := writeScript(t, t.TempDir(), "train.py", `import os, sys, torch
print("pid", os.getpid())
torch.cuda.init()
out, outside = sys.argv[1], sys.argv[2]
for name in ("report.html", "snapshot_rank0_%d.pickle" % os.getpid(), ".snapshot_rank0_%d.pickle.tmp" % os.getpid()):
    target = os.path.join(outside, name.strip("."))
    with open(target, "w") as f:
        f.write("precious\n")
    os.symlink(target, os.path.join(out, name))
`)
	code, stdout, stderr := runTorchmem(t, f.env, "", "record", "-o", out, "--", py, script, out, outside)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	pid := pidOf(t, stdout)
	for _, name := range []string{"report.html", fmt.Sprintf("snapshot_rank0_%d.pickle", pid), fmt.Sprintf("snapshot_rank0_%d.pickle.tmp", pid)} {
		if data, err := os.ReadFile(filepath.Join(outside, name)); err != nil || string(data) != "precious\n" {
			t.Errorf("%s: written through a link (%q, %v)", name, data, err)
		}
	}
	for _, name := range []string{"report.html", fmt.Sprintf("snapshot_rank0_%d.pickle", pid)} {
		if st, err := os.Lstat(filepath.Join(out, name)); err != nil || !st.Mode().IsRegular() || st.Size() < 1000 {
			t.Errorf("%s: %v, %v; want the file itself", name, st, err)
		}
	}
	if !strings.Contains(stderr, analyzeText(t, filepath.Join(out, fmt.Sprintf("snapshot_rank0_%d.pickle", pid)))) {
		t.Errorf("stderr lacks the snapshot's analysis:\n%s", stderr)
	}
}
