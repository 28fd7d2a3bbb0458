package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// The roll-up benchmarks run the torchmem command itself (built once into a
// temporary folder) on generated inputs in the benchmark cache folder
// (TORCHMEM_BENCH_DIR, default $TMPDIR/torchmem-bench; about 6 GB), and
// report the wall time and the peak RSS of the whole process. Run them with
// `make bench-rollup`; they are not part of `make bench`.

// benchBinary builds torchmem for a benchmark.
func benchBinary(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "torchmem")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// measure runs torchmem with args, its output to stdout (nil: discarded),
// and returns the wall time, the peak RSS in bytes and the CPU time (user
// and system): on a shared machine the wall time says more of the load
// than of torchmem.
func measure(b *testing.B, bin string, stdout *bytes.Buffer, args ...string) (time.Duration, int64, time.Duration) {
	b.Helper()
	cmd := exec.Command(bin, args...)
	if stdout != nil {
		cmd.Stdout = stdout
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("torchmem %v: %v: %s", args, err, stderr.String())
	}
	wall := time.Since(start)
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		b.Fatal("no rusage on this system")
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return wall, ru.Maxrss << 10, cpu // Maxrss is in KiB on Linux
}

// BenchmarkRollup256 analyses 256 generated ranks of about 20 MB each in
// one command (analyze --format json FOLDER), after analysing each file in
// a command of its own. Goals: the one command takes about the
// sum of the single-file times divided by the cores (time/ideal near 1),
// and its peak RSS stays under the two largest single-file RSS plus
// 100 MB (peak/bound at most 1). The CPU times (single-cpu-s, the sum over
// the single runs; rollup-cpu-s) tell the work apart from the machine's
// load, which on a shared machine decides the wall times.
func BenchmarkRollup256(b *testing.B) {
	dir, err := st.GeneratedRanks(256, 20e6)
	if err != nil {
		b.Fatal(err)
	}
	bin := benchBinary(b)
	files, _ := filepath.Glob(filepath.Join(dir, "*.pickle"))
	var sum, sumCPU time.Duration
	var rss []int64
	for _, f := range files {
		d, r, c := measure(b, bin, nil, "analyze", "--format", "json", f)
		sum, sumCPU = sum+d, sumCPU+c
		rss = append(rss, r)
	}
	slices.Sort(rss)
	bound := rss[len(rss)-1] + rss[len(rss)-2] + 100<<20
	ideal := sum / time.Duration(runtime.NumCPU())
	var wall, cpu time.Duration
	var peak int64
	for b.Loop() {
		d, r, c := measure(b, bin, nil, "analyze", "--format", "json", dir)
		wall, peak, cpu = max(wall, d), max(peak, r), max(cpu, c)
	}
	b.ReportMetric(sum.Seconds(), "single-sum-s")
	b.ReportMetric(sumCPU.Seconds(), "single-cpu-s")
	b.ReportMetric(cpu.Seconds(), "rollup-cpu-s")
	b.ReportMetric(ideal.Seconds(), "ideal-s")
	b.ReportMetric(wall.Seconds(), "rollup-s")
	b.ReportMetric(wall.Seconds()/ideal.Seconds(), "time/ideal")
	b.ReportMetric(float64(rss[len(rss)-1])/1e6, "single-max-MB")
	b.ReportMetric(float64(peak)/1e6, "rollup-peak-MB")
	b.ReportMetric(float64(peak)/float64(bound), "peak/bound")
}

// summaries10000 writes 10,000 summaries (analyze --format json of the 256
// generated ranks, each used about 39 times under another rank's name) into
// the cache folder, once.
func summaries10000(b *testing.B) string {
	b.Helper()
	ranks, err := st.GeneratedRanks(256, 20e6)
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(filepath.Dir(ranks), "summaries_10000")
	if _, err := os.Stat(filepath.Join(dir, "rank09999.json")); err == nil {
		return dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(ranks, "*.pickle"))
	for i, f := range files {
		s, err := load.Open(f, snapshot.Options{})
		if err != nil {
			b.Fatal(err)
		}
		opts := analysis.DefaultOptions()
		opts.NoTimeline = true
		r := analysis.Analyze(s, opts)
		for k := i; k < 10000; k += len(files) {
			r.Input.Path = fmt.Sprintf("job/rank%05d.pickle", k)
			js, err := json.MarshalIndent(r, "", "  ")
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank%05d.json", k)), js, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return dir
}

// BenchmarkMerge10000 merges 10,000 summaries from their folder, writing
// the roll-up as JSON (every input streamed back out) and as text.
func BenchmarkMerge10000(b *testing.B) {
	dir := summaries10000(b)
	bin := benchBinary(b)
	var total int64
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if st, err := d.Info(); err == nil {
				total += st.Size()
			}
		}
		return nil
	})
	for _, format := range []string{"json", "text"} {
		b.Run(format, func(b *testing.B) {
			var wall, cpu time.Duration
			var peak int64
			for b.Loop() {
				d, r, c := measure(b, bin, nil, "merge", "--format", format, dir)
				wall, peak, cpu = max(wall, d), max(peak, r), max(cpu, c)
			}
			b.ReportMetric(cpu.Seconds(), "cpu-s")
			b.ReportMetric(float64(total)/1e6, "summaries-MB")
			b.ReportMetric(wall.Seconds(), "merge-s")
			b.ReportMetric(float64(peak)/1e6, "peak-MB")
		})
	}
}
