package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/result"
)

// TestLocateIn maps frames recorded on another machine into a checkout.
func TestLocateIn(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"src/proj/model.py", "train.py", "src/other/model.py"} {
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(filepath.Dir(root), "secret.py")
	cases := []struct{ frame, want string }{
		{"/home/ci/work/repo/src/proj/model.py", "src/proj/model.py"},    // the longest tail that exists
		{"/opt/app/src/other/model.py", "src/other/model.py"},            // not the other model.py
		{"/anywhere/train.py", "train.py"},                               // a file at the root
		{`C:\Users\me\repo\src\proj\model.py`, "src/proj/model.py"},      // Windows
		{"src/proj/./model.py", "src/proj/model.py"},                     // relative, with a dot
		{"/usr/lib/python3.11/site-packages/torch/nn/functional.py", ""}, // not in the repository
		{"/home/ci/pkg", ""},                   // a folder is not a file
		{"../" + filepath.Base(outside), ""},   // never outside the root
		{"/home/ci/repo/../../etc/passwd", ""}, // ".." never matches
		{"", ""},
	}
	for _, c := range cases {
		if got := locateIn(root, c.frame); got != c.want {
			t.Errorf("locateIn(%q) = %q, want %q", c.frame, got, c.want)
		}
	}
	if sourceLocator("") != nil {
		t.Error("no root should give no locator")
	}
	if got := sourceLocator(root)("/x/y/train.py"); got != "train.py" {
		t.Errorf("locator: %q", got)
	}
}

func TestRepositoryRoot(t *testing.T) {
	if got := repositoryRoot("/flag/wins"); got != "/flag/wins" {
		t.Errorf("flag: %q", got)
	}
	t.Setenv("GITHUB_WORKSPACE", "/home/runner/work/p/p")
	if got := repositoryRoot(""); got != "/home/runner/work/p/p" {
		t.Errorf("workspace: %q", got)
	}
	t.Setenv("GITHUB_WORKSPACE", "")
	// The tests run inside the repository's checkout (a git worktree has a
	// .git file, a clone a .git folder): its root is found from here.
	want, _ := filepath.Abs(repoRoot())
	if _, err := os.Stat(filepath.Join(want, ".git")); err != nil {
		t.Skip("not a git checkout")
	}
	if got := repositoryRoot(""); got != want {
		t.Errorf("git root %q, want %q", got, want)
	}
}

// TestCheckGitHubLocations: --github on a run whose frames are files of
// the repository being checked points the annotations at them.
func TestCheckGitHubLocations(t *testing.T) {
	dir := t.TempDir()
	// The simulator's frames are train.py and model.py, as recorded on a
	// machine with its checkout in /workspace/proj.
	for _, f := range []string{"model.py", "train.py"} {
		writeTemp(t, dir, f, []byte("# the user's code\n"))
	}
	small := simSnapshot(t, dir, "small.pickle", 2)
	big := simSnapshot(t, dir, "big.pickle", 4)
	code, js, _ := runCLI(nil, "analyze", "--format", "json", "--top", "1000", small)
	if code != exitOK {
		t.Fatal(js)
	}
	base := writeTemp(t, dir, "base.json", []byte(js))
	t.Setenv("GITHUB_STEP_SUMMARY", "")
	code, out, _ := runCLI(nil, "check", big, "--baseline", base, "--tolerance", "5%", "--github", "--source-root", dir)
	if code != exitFailed {
		t.Fatalf("exit %d\n%s", code, out)
	}
	located := 0
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "::error ") {
			continue
		}
		if strings.HasPrefix(l, "::error file=model.py,line=") || strings.HasPrefix(l, "::error file=train.py,line=") {
			located++
		}
		if !strings.Contains(l, "grew most: ") && !strings.Contains(l, "(+") {
			t.Errorf("annotation without sites: %s", l)
		}
	}
	if located == 0 {
		t.Errorf("no annotation points at the repository's files:\n%s", out)
	}
	// Without the files in the repository, no location.
	code, out, _ = runCLI(nil, "check", big, "--baseline", base, "--tolerance", "5%", "--github", "--source-root", t.TempDir())
	if code != exitFailed || strings.Contains(out, "::error file=") {
		t.Errorf("exit %d, located outside the repository:\n%s", code, out)
	}
}

// TestCheckStepSummaryUnwritable: a job summary that cannot be written is a
// warning; the exit status is the checks' verdict, 1 or 0.
func TestCheckStepSummaryUnwritable(t *testing.T) {
	t.Setenv("GITHUB_STEP_SUMMARY", filepath.Join(t.TempDir(), "no", "such", "dir", "summary.md"))
	code, out, stderr := runCLI(nil, "check", "--github", "-b", "peak=1GiB", "-d", "0", gateFile("new.json"))
	if code != exitFailed || !strings.Contains(out, "::error ") ||
		!strings.Contains(stderr, "torchmem: warning: GITHUB_STEP_SUMMARY: open ") || !strings.Contains(stderr, "torchmem: check failed: 1 of 2 checks failed") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	code, _, stderr = runCLI(nil, "check", "--github", "-b", "peak=1TiB", "-d", "0", gateFile("new.json"))
	if code != exitOK || !strings.HasPrefix(stderr, "torchmem: warning: GITHUB_STEP_SUMMARY") {
		t.Errorf("passing run: exit %d, stderr %s", code, stderr)
	}
}

// TestCheckUpdateBaseline: --update-baseline writes the run's analysis
// where --baseline points, and the next check against it passes; a run
// that fails its other checks leaves the baseline alone.
func TestCheckUpdateBaseline(t *testing.T) {
	dir := t.TempDir()
	small := simSnapshot(t, dir, "small.pickle", 2)
	big := simSnapshot(t, dir, "big.pickle", 4)
	base := filepath.Join(dir, "ci", "memory-baseline.json")
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(nil, "check", small, "--baseline", base, "--update-baseline")
	if code != exitOK || !strings.HasPrefix(out, "torchmem check: wrote the baseline "+base+" from "+small) {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	var r result.Result
	data, _ := os.ReadFile(base)
	if err := json.Unmarshal(data, &r); err != nil || r.Schema != result.SchemaID || len(r.Devices) != 1 || len(r.Devices[0].PhasePeaks) == 0 {
		t.Fatalf("baseline %v: %.200s", err, data)
	}
	// Same as analyze --format json --top 1000.
	_, js, _ := runCLI(nil, "analyze", "--format", "json", "--top", "1000", small)
	if string(data) != js {
		t.Errorf("the baseline differs from analyze --format json --top 1000")
	}
	if code, out, _ := runCLI(nil, "check", big, "--baseline", base, "--tolerance", "5%"); code != exitFailed {
		t.Errorf("bigger run against the small baseline: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI(nil, "check", big, "--baseline", base, "--update-baseline"); code != exitOK {
		t.Fatalf("update: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI(nil, "check", big, "--baseline", base); code != exitOK {
		t.Errorf("against its own baseline: exit %d\n%s", code, out)
	}
	// A run over budget does not become the baseline.
	before, _ := os.ReadFile(base)
	code, out, stderr = runCLI(nil, "check", small, "--baseline", base, "--update-baseline", "-b", "peak=1KiB")
	after, _ := os.ReadFile(base)
	if code != exitFailed || !strings.Contains(stderr, "not updated") || string(before) != string(after) {
		t.Errorf("exit %d, baseline changed %v\n%s%s", code, string(before) != string(after), out, stderr)
	}
}
