package main

import (
	st "github.com/torchmem/torchmem/internal/snapshottest"

	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// standinCall is one logged call into the stand-in.
type standinCall struct {
	Call            string         `json:"call"`
	Args            []any          `json:"args"`
	Kwargs          map[string]any `json:"kwargs"`
	Pid             int            `json:"pid"`
	CudaInitialized bool           `json:"cuda_initialized"`
}

// standinFiles are the stand-in's inputs, written by the test.
type standinFiles struct {
	env         []string
	log         string
	snapshot    string // a healthy run: 3 steps of a small model
	oomSnapshot string // the demo OOM
	trace       string // a chrome trace of 4 profiler steps
}

func newStandin(t *testing.T) standinFiles {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(repoRoot(), "testdata", "record", "standin")
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, "path", rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "path", rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	f := standinFiles{
		log:         filepath.Join(dir, "calls.jsonl"),
		snapshot:    filepath.Join(dir, "healthy.pickle"),
		oomSnapshot: filepath.Join(dir, "oom.pickle"),
		trace:       filepath.Join(dir, "trace.json"),
	}
	healthy := st.TrainConfig{Layers: 2, Hidden: 256, Seq: 128, Batch: 2, Heads: 4, Steps: 3}
	for path, data := range map[string][]byte{
		f.snapshot:    st.Marshal(st.Train(healthy).Snapshot(), 4),
		f.oomSnapshot: st.Marshal(st.Train(st.DemoConfig).Snapshot(), 4),
		f.trace:       st.KinetoGrowingList(4, 2<<20, 0, 0),
	} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.env = []string{
		"PYTHONPATH=" + filepath.Join(dir, "path"),
		"TORCHMEM_STANDIN_LOG=" + f.log,
		"TORCHMEM_STANDIN_SNAPSHOT=" + f.snapshot,
		"TORCHMEM_STANDIN_OOM_SNAPSHOT=" + f.oomSnapshot,
		"TORCHMEM_STANDIN_TRACE=" + f.trace,
	}
	return f
}

// calls reads the stand-in's log.
func (f standinFiles) calls(t *testing.T) []standinCall {
	t.Helper()
	data, err := os.ReadFile(f.log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var calls []standinCall
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var c standinCall
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		calls = append(calls, c)
	}
	return calls
}

// names lists the calls by name.
func names(calls []standinCall) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Call)
	}
	return out
}

// find returns the calls of that name.
func find(calls []standinCall, name string) []standinCall {
	var out []standinCall
	for _, c := range calls {
		if c.Call == name {
			out = append(out, c)
		}
	}
	return out
}

// jsonString renders v as JSON, for comparisons of logged arguments.
func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// analyzeText is what torchmem analyze prints for a file.
func analyzeText(t *testing.T, path string) string {
	t.Helper()
	code, out, stderr := runCLI(nil, "analyze", path)
	if code != exitOK {
		t.Fatalf("analyze %s: exit %d: %s", path, code, stderr)
	}
	return out
}

// analyzeJSON is analyze's JSON for a file, with the file's path as FILE.
func analyzeJSON(t *testing.T, path string) string {
	t.Helper()
	code, out, stderr := runCLI(nil, "analyze", "--format", "json", path)
	if code != exitOK {
		t.Fatalf("analyze %s: exit %d: %s", path, code, stderr)
	}
	quoted, _ := json.Marshal(path)
	return strings.ReplaceAll(out, string(quoted), `"FILE"`)
}

// fileLine is torchmem record's line for a file it lists.
func fileLine(name, what string) string {
	return fmt.Sprintf("  %-36s %s\n", name, what)
}

// pidOf reads "pid N" printed by a script.
func pidOf(t *testing.T, stdout string) int {
	t.Helper()
	var pid int
	for _, line := range strings.Split(stdout, "\n") {
		if _, err := fmt.Sscanf(line, "pid %d", &pid); err == nil {
			return pid
		}
	}
	t.Fatalf("no pid in %q", stdout)
	return 0
}
