//go:build unix

package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// oomProgram initialises CUDA, then runs out of memory (the stand-in's
// _standin_oom raises torch.cuda.OutOfMemoryError after the observers ran).
const oomProgram = `import os, torch
print("parent", os.getppid())
print("pid", os.getpid())
torch.cuda.init()
torch.cuda._standin_oom(1610612736)
`

// recordFromWheel: `python -m torchmem record -- python train.py` from the
// installed wheel, with the stand-in for torch that the record tests use
// (testdata/record/standin: no GPU, no PyTorch). Python becomes torchmem
// (exec: the program's parent is the process the test started, not a
// child of it), the hook records, the OOM snapshot is written before the
// error reaches the program and analysed, and torchmem exits with the
// program's status.
func recordFromWheel(t *testing.T, v venv, work string) {
	dir := t.TempDir()
	src := filepath.Join(repoRoot(), "testdata", "record", "standin")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, "path", rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "path", rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	healthy := st.TrainConfig{Layers: 2, Hidden: 256, Seq: 128, Batch: 2, Heads: 4, Steps: 3}
	files := map[string][]byte{
		"healthy.pickle": st.Marshal(st.Train(healthy).Snapshot(), 4),
		"oom.pickle":     st.Marshal(st.Train(st.DemoConfig).Snapshot(), 4),
		"train.py":       []byte(oomProgram),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec := filepath.Join(dir, "rec")
	cmd := exec.Command(filepath.Join(v.dir, "bin", "python"), "-m", "torchmem", "record", "-o", rec, "--",
		"python", filepath.Join(dir, "train.py"))
	cmd.Dir = work
	cmd.Env = append(slices.Clone(v.env),
		"PYTHONPATH="+filepath.Join(dir, "path"),
		"TORCHMEM_STANDIN_SNAPSHOT="+filepath.Join(dir, "healthy.pickle"),
		"TORCHMEM_STANDIN_OOM_SNAPSHOT="+filepath.Join(dir, "oom.pickle"))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := cmd.Process.Pid
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "torch.cuda.OutOfMemoryError") {
		t.Fatalf("exit %d, want 1 (the program's uncaught OOM)\nstdout %s\nstderr %s", code, stdout.String(), stderr.String())
	}
	var parent, pid int
	if _, err := fmt.Sscanf(stdout.String(), "parent %d\npid %d\n", &parent, &pid); err != nil || parent != started {
		t.Errorf("the program's parent is %d (%v), want %d: python -m torchmem did not become torchmem\n%s", parent, err, started, stdout.String())
	}
	oomName := fmt.Sprintf("oom_snapshot_rank0_%d.pickle", pid)
	exitName := fmt.Sprintf("snapshot_rank0_%d.pickle", pid)
	var got []string
	entries, _ := os.ReadDir(rec)
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if want := []string{oomName, "report.html", exitName}; !slices.Equal(got, want) {
		t.Fatalf("%s holds %q, want %q", rec, got, want)
	}
	// What record printed is what the same binary's analyze says of the
	// OOM snapshot it wrote.
	code, analysis, errs := v.run(t, work, nil, "torchmem", "analyze", filepath.Join(rec, oomName))
	if code != 0 || !strings.Contains(analysis, "Out of memory") {
		t.Fatalf("torchmem analyze %s: exit %d %s\n%s", oomName, code, errs, analysis)
	}
	for _, want := range []string{analysis, "torchmem: the command exited with status 1; files in " + rec + ":\n"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("record's stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}
