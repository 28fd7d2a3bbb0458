package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/report"
)

// writeFaultyJob writes the 8 ranks' snapshots of snapshottest.FaultyJob
// into dir/job as oom_snapshot_rankN.pickle, and returns "job".
func writeFaultyJob(t *testing.T, dir string) string {
	t.Helper()
	job := filepath.Join(dir, "job")
	if err := os.MkdirAll(job, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range st.FaultyJob('G') {
		s, _ := st.RankRun(c)
		p := filepath.Join(job, fmt.Sprintf("oom_snapshot_rank%d.pickle", c.Rank))
		if err := os.WriteFile(p, st.Marshal(s.Snapshot(), 4), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return "job"
}

// mustRun runs torchmem and fails the test unless it exits 0.
func mustRun(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	code, out, stderr := runCLI(stdin, args...)
	if code != exitOK {
		t.Fatalf("torchmem %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	return out
}

// TestRollupGolden pins the roll-up of the simulated 8-rank job (a leaking
// rank, a rank with twice the activations that runs out of memory, a rank
// with less memory that runs out first) in text and Markdown, analysed from
// its folder (go test ./cmd/torchmem -update rewrites the golden files).
func TestRollupGolden(t *testing.T) {
	t.Chdir(t.TempDir())
	job := writeFaultyJob(t, ".")
	for _, format := range []string{"text", "markdown"} {
		ext := map[string]string{"text": "txt", "markdown": "md"}[format]
		t.Run(ext, func(t *testing.T) {
			out := mustRun(t, nil, "analyze", "--format", format, job)
			golden(t, "rollup/faultyjob."+ext, out)
			for i, line := range strings.Split(out, "\n") {
				if n := utf8.RuneCountInString(line); format == "text" && n > report.TextWidth {
					t.Errorf("line %d is %d columns wide: %q", i+1, n, line)
				}
			}
		})
	}
}

// TestRollupJSON checks the contract of schema torchmem.rollup/v1 on the
// simulated job: inputs (each the analysis analyze writes for that file
// alone) and the roll-up with its ranks, worst, imbalance and first OOM.
func TestRollupJSON(t *testing.T) {
	t.Chdir(t.TempDir())
	job := writeFaultyJob(t, ".")
	var doc struct {
		Schema string            `json:"schema"`
		Inputs []json.RawMessage `json:"inputs"`
		Rollup map[string]json.RawMessage
	}
	if err := json.Unmarshal([]byte(mustRun(t, nil, "analyze", "--format", "json", job)), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != "torchmem.rollup/v1" || len(doc.Inputs) != 8 {
		t.Fatalf("schema %q, %d inputs; want torchmem.rollup/v1, 8", doc.Schema, len(doc.Inputs))
	}
	for _, k := range []string{"ranks", "worst", "imbalance", "first_oom", "outliers", "common_sites", "notes"} {
		if _, ok := doc.Rollup[k]; !ok {
			t.Errorf("rollup has no %q", k)
		}
	}
	var ranks []struct {
		Input     int    `json:"input"`
		Rank      int    `json:"rank"`
		Device    int    `json:"device"`
		PeakBytes int64  `json:"peak_bytes"`
		PeakPhase string `json:"peak_phase"`
		OOM       *struct {
			RequestedBytes int64 `json:"requested_bytes"`
		} `json:"oom"`
	}
	if err := json.Unmarshal(doc.Rollup["ranks"], &ranks); err != nil || len(ranks) != 8 {
		t.Fatalf("ranks: %v (%d)", err, len(ranks))
	}
	var worst, first struct{ Rank, Device int }
	json.Unmarshal(doc.Rollup["worst"], &worst)
	json.Unmarshal(doc.Rollup["first_oom"], &first)
	if worst.Rank != 3 || first.Rank != 6 {
		t.Errorf("worst rank %d, first OOM rank %d; want 3, 6", worst.Rank, first.Rank)
	}
	// Each input is what analyze --format json writes for its file alone.
	for _, r := range ranks {
		alone := mustRun(t, nil, "analyze", "--format", "json", filepath.Join(job, fmt.Sprintf("oom_snapshot_rank%d.pickle", r.Rank)))
		var a, b any
		json.Unmarshal([]byte(alone), &a)
		json.Unmarshal(doc.Inputs[r.Input], &b)
		aj, _ := json.Marshal(a)
		bj, _ := json.Marshal(b)
		if !bytes.Equal(aj, bj) {
			t.Errorf("rank %d: its input differs from analyze on the file alone", r.Rank)
		}
	}
}

// TestMergeSameAsAnalyze: merging the per-file JSON summaries gives,
// byte for byte, the roll-up that analysing the files together gives — in
// every format, from a folder, from files, from a concatenated stream on
// stdin (gzip too), and from the roll-up's own JSON.
func TestMergeSameAsAnalyze(t *testing.T) {
	t.Chdir(t.TempDir())
	job := writeFaultyJob(t, ".")
	files, _ := filepath.Glob(filepath.Join(job, "*.pickle"))
	if err := os.MkdirAll("summaries", 0o755); err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	var summaries []string
	for i, f := range files {
		js := mustRun(t, nil, "analyze", "--format", "json", f)
		p := filepath.Join("summaries", fmt.Sprintf("rank%d.json", i))
		if err := os.WriteFile(p, []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
		summaries = append(summaries, p)
		stream.WriteString(js)
	}
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write(stream.Bytes())
	zw.Close()
	rollupJSON := mustRun(t, nil, "analyze", "--format", "json", job)
	if err := os.WriteFile("rollup.json", []byte(rollupJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"json", "text", "markdown", "html"} {
		t.Run(format, func(t *testing.T) {
			var together string
			if format == "html" {
				together = mustRun(t, nil, "report", "-o", "-", job)
			} else {
				together = mustRun(t, nil, "analyze", "--format", format, job)
			}
			ways := []struct {
				name  string
				stdin []byte
				args  []string
			}{
				{"folder", nil, []string{"summaries"}},
				{"files", nil, summaries},
				{"stream", stream.Bytes(), []string{"-"}},
				{"gzip stream", zipped.Bytes(), []string{"-"}},
				{"roll-up JSON", nil, []string{"rollup.json"}},
			}
			for _, w := range ways {
				merged := mustRun(t, w.stdin, append([]string{"merge", "--format", format}, w.args...)...)
				if merged != together {
					t.Errorf("merge of the %s differs from analysing the files together:\n%s", w.name, firstDiff(merged, together))
				}
			}
		})
	}
}

// firstDiff shows where two outputs part.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < min(len(g), len(w)); i++ {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n got %q\nwant %q", i+1, clipString(g[i]), clipString(w[i]))
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(g), len(w))
}

func clipString(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// TestRollupRealFiles rolls up the real 3-device OOM snapshot with the real
// DDP trace (rank 1 by its distributedInfo): text golden, and the JSON's
// worst row and first OOM are the snapshot's device 1 (facts from
// testdata/facts/rollup_facts.py).
func TestRollupRealFiles(t *testing.T) {
	snap := shared(t, "snapshots", "genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle")
	ddp := shared(t, "traces", "hta_ddp_training_gpu_memory.json.gz")
	t.Chdir(filepath.Dir(filepath.Dir(snap)))
	args := []string{filepath.Join("snapshots", filepath.Base(snap)), filepath.Join("traces", filepath.Base(ddp))}
	golden(t, "rollup/constructorsun_3dev_hta_ddp.txt", mustRun(t, nil, append([]string{"analyze"}, args...)...))
	var doc struct {
		Rollup struct {
			Ranks []struct {
				Rank, Device int
				RankFrom     string `json:"rank_from"`
			}
			Worst    struct{ Input, Device int }
			FirstOOM struct {
				Input, Device int
				By            string
				TimeUS        int64 `json:"time_us"`
			} `json:"first_oom"`
			Imbalance float64
		}
	}
	if err := json.Unmarshal([]byte(mustRun(t, nil, append([]string{"analyze", "--format", "json"}, args...)...)), &doc); err != nil {
		t.Fatal(err)
	}
	ru := doc.Rollup
	if len(ru.Ranks) != 4 || ru.Ranks[3].Rank != 1 || ru.Ranks[3].RankFrom != "distributed_info" {
		t.Errorf("ranks %+v; want 3 devices of rank 0 and the trace's rank 1 from distributedInfo", ru.Ranks)
	}
	if ru.Worst.Input != 0 || ru.Worst.Device != 1 || ru.FirstOOM.Device != 1 || ru.FirstOOM.By != "time" ||
		ru.FirstOOM.TimeUS != 1757253257949855 || ru.Imbalance != 9.9407 {
		// 9.9407: device 1's 84,063,358,976 B over the median of the three
		// other rows (6,629,508,096, 8,456,489,984 and 21,564,660,224 B).
		t.Errorf("worst %+v, first OOM %+v, imbalance %v; want device 1 of the snapshot, OOM at 1757253257949855 by time, 9.9407", ru.Worst, ru.FirstOOM, ru.Imbalance)
	}
}

// TestRollupInputs: a folder is every snapshot and trace below it, gzip or
// not, found by content (not by name) and in name order; torchmem's own
// JSON, logs and configs beside them are left out by analyze and are what
// merge takes. Bad inputs are one-line errors with exit status 2 (a bad
// rank among good ones too with --strict; TestRollupSurvivesBadInputs has
// the roll-up without it).
func TestRollupInputs(t *testing.T) {
	t.Chdir(t.TempDir())
	job := writeFaultyJob(t, ".")
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rank7, _ := os.ReadFile(filepath.Join(job, "oom_snapshot_rank7.pickle"))
	os.Remove(filepath.Join(job, "oom_snapshot_rank7.pickle"))
	write("job/deeper/rank7.dat", st.Gzip(rank7)) // gzip, an odd name, one folder down
	write("job/train.log", []byte("step 1 loss 2.3\n"))
	write("job/config.json", []byte(`{"lr": 0.001}`))
	summary := mustRun(t, nil, "analyze", "--format", "json", filepath.Join(job, "oom_snapshot_rank0.pickle"))
	write("job/summary.json", []byte(summary))

	var doc struct {
		Inputs []struct {
			Input struct{ Path string }
		}
	}
	if err := json.Unmarshal([]byte(mustRun(t, nil, "analyze", "--format", "json", job)), &doc); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, in := range doc.Inputs {
		paths = append(paths, in.Input.Path)
	}
	want := []string{"job/deeper/rank7.dat"}
	for r := 0; r < 7; r++ {
		want = append(want, fmt.Sprintf("job/oom_snapshot_rank%d.pickle", r))
	}
	if strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Errorf("inputs %q; want %q", paths, want)
	}
	merged := mustRun(t, nil, "merge", "--format", "json", job)
	if !strings.Contains(merged, `"inputs": 1,`) {
		t.Errorf("merge of the folder took more than its one summary")
	}

	empty := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"folder without inputs", []string{"analyze", empty}, empty + ": no snapshot or trace in this folder or below it"},
		{"folder without summaries", []string{"merge", "job/deeper"}, "job/deeper: no torchmem JSON"},
		{"a snapshot given to merge", []string{"merge", "job/oom_snapshot_rank1.pickle"}, "job/oom_snapshot_rank1.pickle: bad JSON"},
		{"stdin twice", []string{"analyze", "-", "-"}, "standard input given twice"},
		{"one bad rank among many, --strict", []string{"analyze", "--strict", "job", "job/train.log"}, "job/train.log: not a PyTorch memory snapshot"},
		{"bad --rank", []string{"analyze", "--rank", "x", "job"}, `--rank "x"`},
		{"missing summary", []string{"merge", "nothere.json"}, "nothere.json: no such file or directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCLI(nil, tc.args...)
			if code != exitInput || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, stderr, tc.want)
			}
			_ = out
		})
	}
}
