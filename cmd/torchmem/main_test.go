package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	goldenfile "github.com/torchmem/torchmem/internal/snapshottest/golden"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// repoRoot is the repository root, from this file's location.
func repoRoot() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..")
}

// shared returns the path of a real file in ../shared.
func shared(t *testing.T, sub, name string) string {
	t.Helper()
	return st.SharedFile(t, sub, name)
}

// relative returns path relative to the test's working folder, so that
// output naming it is the same in every checkout with ../shared beside it.
func relative(t *testing.T, path string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil {
		return path
	}
	return rel
}

// runCLI runs torchmem in-process and returns exit code, stdout, stderr.
func runCLI(stdin []byte, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, bytes.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, filepath.Join(repoRoot(), "testdata", "golden", name), []byte(got))
}

func TestBadInputExitCodes(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	demo, err := os.ReadFile(filepath.Join(repoRoot(), "testdata", "demo", "oom_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string // in the one-line error
	}{
		{"empty", []string{"info", write("empty.pickle", nil)}, "empty.pickle: empty file"},
		{"truncated", []string{"info", write("cut.pickle", demo[:len(demo)/2])}, "truncated pickle"},
		{"random", []string{"info", write("random.bin", []byte("\x01\x02garbage\x00"))}, "not a PyTorch memory snapshot"},
		{"global", []string{"info", write("evil.pickle", []byte("\x80\x04cos\nsystem\n."))}, "refusing pickle opcode GLOBAL (0x63): it would import or call code, and snapshots never need that at byte offset 2"},
		{"missing", []string{"info", filepath.Join(dir, "nope.pickle")}, "nope.pickle: no such file or directory"},
		{"directory", []string{"info", dir}, "is a directory"},
		{"bad format", []string{"info", "--format", "yaml", "x"}, `--format "yaml"`},
		{"no args", []string{"info"}, "requires at least 1 arg"},
		{"unknown flag", []string{"info", "--bogus"}, "unknown flag: --bogus"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"max input", []string{"--max-input-bytes", "1KiB", "info", write("demo.pickle", demo)}, "past the limit of 1024 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(nil, c.args...)
			if code != exitInput {
				t.Errorf("exit %d, want %d; stderr %q", code, exitInput, stderr)
			}
			first := strings.SplitN(stderr, "\n", 2)[0]
			if !strings.HasPrefix(first, "torchmem: ") || !strings.Contains(first, c.want) {
				t.Errorf("stderr %q, want one line with %q", stderr, c.want)
			}
			if strings.Contains(stderr, "goroutine") || stdout != "" {
				t.Errorf("unexpected output: stdout %q stderr %q", stdout, stderr)
			}
		})
	}
}

func TestInfoGolden(t *testing.T) {
	demo := filepath.Join(repoRoot(), "testdata", "demo", "oom_snapshot.pickle")
	cases := []struct {
		golden string
		args   []string
	}{
		{"info/demo.txt", []string{"info", demo}},
		{"info/demo.json", []string{"info", "--format", "json", demo}},
		{"info/nesta_oom.txt", []string{"info", shared(t, "snapshots", "genC_torch2.2_nesta_OOM_pickle_named_json.pickle")}},
		{"info/constructorsun_oom.txt", []string{"info", shared(t, "snapshots", "genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle")}},
		{"info/yiyi_2.0.txt", []string{"info", shared(t, "snapshots", "genA_torch2.0_yiyi_oom_snapshot.pickle")}},
		{"info/muduard_segment_list.txt", []string{"info", shared(t, "snapshots", "segments_list_memory_snapshot_muduard.pkl")}},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			code, out, stderr := runCLI(nil, c.args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			// Paths differ between machines: keep only the base name.
			out = strings.ReplaceAll(out, filepath.Dir(c.args[len(c.args)-1])+string(filepath.Separator), "")
			golden(t, c.golden, out)
		})
	}
}

func TestInfoStdin(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(), "testdata", "demo", "oom_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(data, "info", "-")
	if code != exitOK || !strings.HasPrefix(out, "-\n") || !strings.Contains(out, "OOM         device 0, entry 921: requested 1.50 GiB with 910 MiB free") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

func TestHelpHasExamples(t *testing.T) {
	root := newRootCmd(&globals{})
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if c.Example == "" {
			t.Errorf("torchmem %s has no examples in its help", c.Name())
		}
	}
	code, out, _ := runCLI(nil, "completion", "bash")
	if code != exitOK || !strings.Contains(out, "torchmem") {
		t.Errorf("shell completion: exit %d", code)
	}
}

// TestInfoTraceEnd: for a trace, info's allocated bytes at the end are the
// pre-window baseline plus the net of the events — 4,096,614,400 on the HTA
// DDP trace, the step-end Total Allocated of its [memory] events, checked
// by hand with python3 (json and gzip).
func TestInfoTraceEnd(t *testing.T) {
	path := shared(t, "traces", "hta_ddp_training_gpu_memory.json.gz")
	code, out, stderr := runCLI(nil, "info", "--format", "json", path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var sum struct {
		Devices []struct {
			Device    int   `json:"device"`
			Allocated int64 `json:"allocated_bytes"`
			Reserved  int64 `json:"reserved_bytes"`
			Baseline  int64 `json:"baseline_bytes"`
		} `json:"devices"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range sum.Devices {
		if d.Device == 1 {
			found = true
			if d.Allocated != 4096614400 || d.Baseline != 4096614400 || d.Reserved != 12782141440 {
				t.Errorf("device 1: %+v", d)
			}
		}
	}
	if !found {
		t.Errorf("no device 1 in %+v", sum.Devices)
	}
}

// TestInfoJSONSchema: info's JSON names its schema, for one file or
// several, and is not taken for an analysis.
func TestInfoJSONSchema(t *testing.T) {
	demo := filepath.Join(repoRoot(), "testdata", "demo", "oom_snapshot.pickle")
	code, out, _ := runCLI(nil, "info", "--format", "json", demo, demo)
	var many []struct {
		Schema string `json:"schema"`
		Path   string `json:"path"`
	}
	if err := json.Unmarshal([]byte(out), &many); code != exitOK || err != nil || len(many) != 2 {
		t.Fatalf("exit %d, %v: %.200s", code, err, out)
	}
	for _, m := range many {
		if m.Schema != "torchmem.info/v1" || m.Path != demo {
			t.Errorf("%+v", m)
		}
	}
	_, one, _ := runCLI(nil, "info", "--format", "json", demo)
	if !strings.HasPrefix(one, "{\n  \"schema\": \"torchmem.info/v1\",\n") {
		t.Errorf("one file: %.80q", one)
	}
	info := filepath.Join(t.TempDir(), "info.json")
	if err := os.WriteFile(info, []byte(one), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(nil, "check", "--baseline", info, demo)
	if code != exitInput || !strings.Contains(stderr, "schema torchmem.info/v1 is not an analysis") {
		t.Errorf("info JSON as a baseline: exit %d %q", code, stderr)
	}
}

// TestInfoDistributed: info says which rank wrote a trace, as its
// distributedInfo states (the HTA DDP trace: rank 1 of 2, nccl), in text
// and in JSON, and says nothing of ranks for a file that does not state one.
func TestInfoDistributed(t *testing.T) {
	path := shared(t, "traces", "hta_ddp_training_gpu_memory.json.gz")
	code, out, stderr := runCLI(nil, "info", path)
	if code != exitOK || !strings.Contains(out, "\n  distributed rank 1 of 2 (nccl)\n") {
		t.Errorf("text: exit %d %s: %.400s", code, stderr, out)
	}
	_, out, _ = runCLI(nil, "info", "--format", "json", path)
	var sum struct {
		Distributed *struct {
			Rank      int    `json:"rank"`
			WorldSize int    `json:"world_size"`
			Backend   string `json:"backend"`
		} `json:"distributed"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Distributed == nil ||
		sum.Distributed.Rank != 1 || sum.Distributed.WorldSize != 2 || sum.Distributed.Backend != "nccl" {
		t.Errorf("JSON: %v %+v", err, sum.Distributed)
	}
	demo := filepath.Join(repoRoot(), "testdata", "demo", "oom_snapshot.pickle")
	_, out, _ = runCLI(nil, "info", "--format", "json", demo)
	if strings.Contains(out, "distributed") {
		t.Errorf("a snapshot states no rank, yet: %.300s", out)
	}
	_, out, _ = runCLI(nil, "info", demo)
	if strings.Contains(out, "distributed") {
		t.Errorf("a snapshot states no rank, yet: %.300s", out)
	}
}
