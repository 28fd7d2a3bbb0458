package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// BenchmarkAgainstPython runs `torchmem analyze --format json` (read,
// analyse, print: the whole command) on generated inputs and CPython
// loading the same file (pickle.load, json.load for the trace), in
// alternation, several rounds (TORCHMEM_BENCH_ROUNDS, default 3), and
// prints a table of medians: torchmem's wall time, CPU time and peak RSS,
// Python's load time (inside the interpreter: its start not counted),
// the ratio of the two and RSS ÷ file size. Measuring both in one run,
// alternated, keeps a shared machine's load out of the ratio; the load
// average before and after is printed. Needs python3 (skipped without).
// make bench runs it.
func BenchmarkAgainstPython(b *testing.B) {
	python, err := exec.LookPath("python3")
	if err != nil {
		b.Skip("python3 not found")
	}
	rounds := 3
	if r, err := strconv.Atoi(os.Getenv("TORCHMEM_BENCH_ROUNDS")); err == nil && r > 0 {
		rounds = r
	}
	inputs := []struct {
		name, kind string
		size       int64
		load       string
	}{
		{"generated training snapshot", "training", 200e6, "pickle.load"},
		{"generated training snapshot", "training", 1e9, "pickle.load"},
		{"generated dense snapshot (frames lists shared)", "dense", 170e6, "pickle.load"},
		{"generated trace", "trace", 1e9, "json.load"},
	}
	bin := benchBinary(b)
	var rows []string
	loadBefore := loadAverage()
	for b.Loop() {
		rows = rows[:0]
		for _, in := range inputs {
			path, err := st.GeneratedFile(in.kind, in.size)
			if err != nil {
				b.Fatal(err)
			}
			info, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			var walls, cpus, pys, pyCPUs []time.Duration
			var rss []int64
			for range rounds {
				w, r, c := measure(b, bin, nil, "analyze", "--format", "json", path)
				walls, rss, cpus = append(walls, w), append(rss, r), append(cpus, c)
				py, pyCPU := pythonLoad(b, python, in.load, path)
				pys, pyCPUs = append(pys, py), append(pyCPUs, pyCPU)
			}
			wall, cpu, py, pyCPU, peak := median(walls), median(cpus), median(pys), median(pyCPUs), median(rss)
			mb := float64(info.Size()) / 1e6
			rows = append(rows, fmt.Sprintf("| %s | %.0f MB | %.2f s | %.2f s | %.0f MB | `%s` %.2f s | %.2f s | %.1f× | %.1f× | %.2f× |",
				in.name, mb, wall.Seconds(), cpu.Seconds(), float64(peak)/1e6, in.load, py.Seconds(), pyCPU.Seconds(),
				py.Seconds()/wall.Seconds(), pyCPU.Seconds()/cpu.Seconds(), float64(peak)/float64(info.Size())))
			b.ReportMetric(py.Seconds()/wall.Seconds(), in.kind+fmt.Sprintf("%.0fMB", mb)+"-speedup")
			b.ReportMetric(float64(peak)/float64(info.Size()), in.kind+fmt.Sprintf("%.0fMB", mb)+"-rss/file")
		}
	}
	fmt.Printf("\n%d CPUs, %s, %s; load average %s before, %s after; medians of %d rounds, torchmem and Python alternated\n\n",
		runtime.NumCPU(), runtime.Version(), pythonVersion(python), loadBefore, loadAverage(), rounds)
	fmt.Println("| input | size | torchmem wall | torchmem CPU | torchmem peak RSS | Python load (wall) | Python load (CPU) | speed-up (wall) | speed-up (CPU) | RSS / file |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Println(r)
	}
	fmt.Println()
}

// pythonLoad is the time and the CPU time CPython takes to load path with
// pickle.load or json.load, measured inside the interpreter.
func pythonLoad(b *testing.B, python, load, path string) (time.Duration, time.Duration) {
	b.Helper()
	mod := strings.TrimSuffix(load, ".load")
	script := fmt.Sprintf("import %s, sys, time\nf = open(sys.argv[1], 'rb')\nt, c = time.perf_counter(), time.process_time()\n%s(f)\nprint(time.perf_counter() - t, time.process_time() - c)\n", mod, load)
	out, err := exec.Command(python, "-c", script, path).Output()
	if err != nil {
		b.Fatalf("python3 %s %s: %v", load, path, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		b.Fatalf("python3 printed %q", out)
	}
	var secs [2]time.Duration
	for i, x := range f {
		v, err := strconv.ParseFloat(x, 64)
		if err != nil {
			b.Fatalf("python3 printed %q", out)
		}
		secs[i] = time.Duration(v * float64(time.Second))
	}
	return secs[0], secs[1]
}

// median is the middle value (the lower of the two middle ones).
func median[T int64 | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// loadAverage is the 1-minute load average ("?" where /proc has none).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// pythonVersion is what python3 --version prints.
func pythonVersion(python string) string {
	out, err := exec.Command(python, "--version").CombinedOutput()
	if err != nil {
		return "python3"
	}
	return strings.TrimSpace(string(bytes.TrimSpace(out)))
}
