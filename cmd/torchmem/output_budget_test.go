package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// sharedNameSnapshot is the smallest file that names one long string
// everywhere: a frame of a 3 MiB function name in a 1 MiB-long file, stored
// once and named by an allocation site and the OOM of each of 256 devices
// (14 KB of gzip).
func sharedNameSnapshot() []byte {
	s := st.NewSim()
	site := s.Stack(s.F(strings.Repeat("d/", 512<<10)+"model.py", 7, strings.Repeat("n", 3<<20)), s.F("train.py", 3, "main"))
	for d := range snapshot.DefaultMaxDevices {
		s.Alloc(d, 1<<20, site)
		s.OOM(d, 1<<40, 1<<20, site)
	}
	return st.Gzip(st.Marshal(s.Snapshot(), 4))
}

// deepNamesSnapshot names the most text per byte once names are cut to
// 4 KB: 256 devices, each running three steps of 16 sites of stacks 41
// frames deep, every name 4 KB, then running out of memory (230 KB of
// gzip).
func deepNamesSnapshot() []byte {
	s := st.NewSim()
	long := func(i int) string { return fmt.Sprintf("f%03d_%s", i, strings.Repeat("w", 4090)) }
	var deep []*st.Dict
	for i := range 40 {
		deep = append(deep, s.F(fmt.Sprintf("pkg/%s%03d.py", strings.Repeat("d", 4080), i), i+1, long(i)))
	}
	var sites []*st.List
	for i := range 16 {
		sites = append(sites, s.Stack(append([]*st.Dict{s.F(strings.Repeat("m", 4080)+"model.py", 100+i, long(100+i))}, deep...)...))
	}
	for d := range snapshot.DefaultMaxDevices {
		for step := range 3 {
			s.Annotate(d, fmt.Sprint("ProfilerStep#", step), func() {
				for i, site := range sites {
					s.Alloc(d, int64(i+1)<<20, site)
				}
			})
		}
		s.OOM(d, 1<<40, 1<<20, sites[0])
	}
	return st.Gzip(st.Marshal(s.Snapshot(), 4))
}

// sharedNameTrace is a chrome trace of [memory] events on 256 devices
// inside operators that share one 64 KiB name (gzip: a trace cannot share
// a string, each event repeats it).
func sharedNameTrace() []byte {
	var b strings.Builder
	b.WriteString(`{"traceEvents": [`)
	name := "aten::" + strings.Repeat("x", 64<<10)
	for d := range snapshot.DefaultMaxDevices {
		if d > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"ph": "X", "cat": "cpu_op", "name": %q, "pid": 1, "tid": 1, "ts": %d, "dur": 3},`, name, 4*d)
		fmt.Fprintf(&b, `{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": %d, "args": {"Total Allocated": 1048576, "Bytes": 1048576, "Addr": 4096, "Device Id": %d, "Device Type": 1}}`, 4*d+1, d)
	}
	b.WriteString(`]}`)
	return st.Gzip([]byte(b.String()))
}

// TestOutputBudget: files that name long strings over and over — one
// name shared by 256 devices (a 7 KB gzip made analyze write 810 MB at
// 3.2 GB RSS), deep stacks of 4 KB names on 256 devices, a trace whose
// operators share one name (a 22 KB trace made 538 MB of JSON) — give
// outputs within the run's budget in every format (analyze text, Markdown,
// JSON; report's HTML; check's annotations, JUnit and job summary; merge),
// with the long names cut and marked, exit 0, and the run allocates within
// SECURITY.md's figure per byte of input (the runtime's count).
func TestOutputBudget(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GITHUB_STEP_SUMMARY", filepath.Join(dir, "summary.md"))
	for _, f := range []struct {
		name    string
		data    []byte
		formats string // those run ("" all): each run of the deep file takes seconds
	}{
		{"shared.pickle.gz", sharedNameSnapshot(), ""},
		{"deep.pickle.gz", deepNamesSnapshot(), "json html"},
		{"trace.json.gz", sharedNameTrace(), "text json html"},
	} {
		p := writeTemp(t, dir, f.name, f.data)
		snap, err := load.Read(bytes.NewReader(f.data), p, int64(len(f.data)), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		decoded := snap.Source.Bytes
		limit := max(int64(outputBudgetBase), outputBudgetPerByte*decoded)
		summary := filepath.Join(dir, f.name+".json")
		for _, c := range []struct {
			format string
			args   []string
			files  []string
		}{
			{"text", []string{"analyze", p}, nil},
			{"markdown", []string{"analyze", "-f", "markdown", p}, nil},
			{"json", []string{"analyze", "-f", "json", p}, nil},
			{"html", []string{"report", p, "-o", filepath.Join(dir, "r.html")}, []string{filepath.Join(dir, "r.html")}},
			{"check", []string{"check", p, "--budget", "peak=1KiB", "--github", "--junit", filepath.Join(dir, "j.xml")},
				[]string{filepath.Join(dir, "j.xml"), filepath.Join(dir, "summary.md")}},
			{"merge", []string{"merge", summary}, nil},
		} {
			if f.formats != "" && !strings.Contains(f.formats, c.format) {
				continue
			}
			t.Run(f.name+"/"+c.format, func(t *testing.T) {
				os.Remove(filepath.Join(dir, "summary.md"))
				if c.format == "merge" {
					writeTemp(t, dir, f.name+".json", []byte(mustRun(t, nil, "analyze", "-f", "json", p)))
				}
				var code int
				var out, stderr string
				heap := st.HeapAllocated(func() { code, out, stderr = runCLI(nil, c.args...) })
				if code != exitOK && !(c.format == "check" && code == exitFailed) {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				n := int64(len(out))
				for _, file := range c.files {
					b, err := os.ReadFile(file)
					if err != nil {
						t.Fatal(err)
					}
					n += int64(len(b))
					out += string(b)
				}
				t.Logf("%d bytes decoded: %d bytes written, %d allocated", decoded, n, heap)
				if n > limit {
					t.Errorf("%d bytes written, past the budget of %d", n, limit)
				}
				// The page shows what fits in 2 MB, and says what it leaves out.
				if !strings.Contains(out, "…[+") && !strings.Contains(out, "…[output budget: +") && !strings.Contains(out, "this page leaves out") {
					t.Errorf("no cut name marked in the output")
				}
				if heap > uint64(128*decoded+256<<20) {
					t.Errorf("allocated %d bytes for %d bytes of input", heap, decoded)
				}
			})
		}
	}
}

// TestOutputBudgetLimit: a run writes at most outputBudgetBase bytes, or
// outputBudgetPerByte per byte of its input when that is more; a write
// past it fails with one line naming the budget, which run turns into
// exit 2 (outputWriter keeps the first error).
func TestOutputBudgetLimit(t *testing.T) {
	for _, input := range []int64{0, 1 << 20, 64 << 20} {
		b := newRunBudget()
		b.inputBytes = input
		limit := max(int64(outputBudgetBase), outputBudgetPerByte*input)
		out := &outputWriter{w: budgetWriter{io.Discard, b}}
		chunk := make([]byte, 1<<20)
		written := int64(0)
		for written+int64(len(chunk)) <= limit {
			if _, err := out.Write(chunk); err != nil {
				t.Fatalf("input %d: write failed at %d of %d bytes: %v", input, written, limit, err)
			}
			written += int64(len(chunk))
		}
		_, err := out.Write(chunk)
		if err == nil || out.err == nil || !strings.Contains(outputError(err).Error(), fmt.Sprintf("past the output budget of %d bytes", limit)) ||
			strings.Contains(err.Error(), "\n") {
			t.Errorf("input %d: a write past %d bytes: %v", input, limit, err)
		}
	}
}
