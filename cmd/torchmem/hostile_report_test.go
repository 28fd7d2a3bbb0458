package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/report"
	"github.com/torchmem/torchmem/snapshot"
)

// manyDeviceSnapshot is a snapshot of the most devices a file may hold,
// each running steps that keep memory (leaks) at many sites of deep stacks
// of long names, then running out of memory: every list a page shows is
// long on every device, from a few KB of gzip (the frames are shared).
func manyDeviceSnapshot() []byte {
	s := st.NewSim()
	long := func(i int) string { return fmt.Sprintf("f%03d_%s", i, strings.Repeat("w", 200)) }
	var deep []*st.Dict
	for i := range 40 {
		deep = append(deep, s.F(fmt.Sprintf("pkg/mod%03d.py", i), i+1, long(i)))
	}
	var sites []*st.List
	for i := range 8 {
		sites = append(sites, s.Stack(append([]*st.Dict{s.F("model.py", 100+i, long(100+i))}, deep...)...))
	}
	for d := range snapshot.DefaultMaxDevices {
		for step := range 3 {
			s.Annotate(d, fmt.Sprint("ProfilerStep#", step), func() {
				for i, site := range sites {
					s.Alloc(d, int64(i+1)<<20, site) // kept: grows every step
				}
			})
		}
		s.OOM(d, 1<<40, 1<<20, sites[0])
	}
	return st.Marshal(s.Snapshot(), 4)
}

// manyDeviceTrace is a chrome trace of [memory] events on the most devices
// a file may hold, inside operators of long distinct names.
func manyDeviceTrace() []byte {
	var b strings.Builder
	b.WriteString(`{"schemaVersion": 1, "profile_memory": 1, "traceEvents": [`)
	ts := 0
	for d := range snapshot.DefaultMaxDevices {
		for i := range 8 {
			if d > 0 || i > 0 {
				b.WriteString(",\n")
			}
			name := fmt.Sprintf("aten::op%03d_%s", i, strings.Repeat("x", 40))
			fmt.Fprintf(&b, `{"ph": "X", "cat": "cpu_op", "name": %q, "pid": 1, "tid": 1, "ts": %d, "dur": 3},`, name, ts)
			fmt.Fprintf(&b, `{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": %d, "args": {"Total Allocated": %d, "Bytes": %d, "Addr": %d, "Device Id": %d, "Device Type": 1}}`,
				ts+1, (i+1)<<20, 1<<20, 4096*(i+1), d)
			ts += 4
		}
	}
	b.WriteString(`], "traceName": "devices.json"}`)
	return []byte(b.String())
}

// TestReportUnderTwoMBForHostileFiles: report writes a page under 2 MB for
// files whose unbounded page is larger — a 100 KB gzip of a snapshot of 256
// devices (85 MB unbounded) and a 700 KB chrome trace of 256 devices (4.8 MB)
// — and the page says what it leaves out (49 MiB came from a 1.4 KB gzip,
// 516 MiB from a 615 KB trace).
func TestReportUnderTwoMBForHostileFiles(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"snapshot.pickle.gz", st.Gzip(manyDeviceSnapshot())},
		{"trace.json", manyDeviceTrace()},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeTemp(t, dir, c.name, c.data)
			snap, err := load.Read(bytes.NewReader(c.data), p, int64(len(c.data)), snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var full bytes.Buffer
			if err := report.HTML(&full, analysis.Analyze(snap, analysis.DefaultOptions()), report.HTMLOptions{MaxBytes: 1 << 30}); err != nil {
				t.Fatal(err)
			}
			out := p + ".html"
			if code, _, stderr := runCLI(nil, "report", p, "-o", out); code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			page, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d-byte file: page of %d bytes, %d unbounded", len(c.data), len(page), full.Len())
			if full.Len() <= report.DefaultHTMLMaxBytes {
				t.Fatalf("the unbounded page is %d bytes: the file does not test the limit", full.Len())
			}
			if len(page) > report.DefaultHTMLMaxBytes {
				t.Errorf("page of %d bytes, over %d", len(page), report.DefaultHTMLMaxBytes)
			}
			if !strings.Contains(string(page), "this page leaves out") {
				t.Errorf("the page does not say what it leaves out")
			}
		})
	}
}
