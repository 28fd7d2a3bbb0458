//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// launcher is a stand-in for torchrun: it starts one worker a rank, all at
// once, each with RANK set and the stand-in's snapshot files named by
// sys.argv[3] (a pattern with {rank}), waits for them all and exits with
// the highest status, as torchrun ends when a worker fails.
const launcher = `import os, subprocess, sys
worker, ranks, pattern = sys.argv[1], int(sys.argv[2]), sys.argv[3]
procs = []
for rank in range(ranks):
    snap = pattern.replace("{rank}", str(rank))
    env = dict(os.environ, RANK=str(rank), TORCHMEM_STANDIN_SNAPSHOT=snap, TORCHMEM_STANDIN_OOM_SNAPSHOT=snap)
    procs.append(subprocess.Popen([sys.executable, worker], env=env))
sys.exit(max(p.wait() for p in procs))
`

// workerPids reads the "pid N rank R" lines the workers print.
func workerPids(t *testing.T, stdout string) map[int]int {
	t.Helper()
	pids := map[int]int{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var pid, rank int
		if _, err := fmt.Sscanf(line, "pid %d rank %d", &pid, &rank); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		pids[rank] = pid
	}
	return pids
}

// TestRecordRollsUpRanks: record of a two-rank torchrun job whose workers
// dump the real snapshots of ../shared/recorded/record_ddp (through the
// hook, pickled again by Python) ends with the roll-up — on stderr what
// `torchmem analyze DIR` prints, rank 1 the worst rank at 1.5477× rank 0's
// peak (testdata/facts/rollup_facts.py) — and report.html, the roll-up page
// linking each rank's own page, which is `torchmem report` of its snapshot.
func TestRecordRollsUpRanks(t *testing.T) {
	py := needPython(t)
	ddp := st.SharedDir(t, filepath.Join("recorded", "record_ddp"))
	real := map[int]string{0: filepath.Join(ddp, "snapshot_rank0_682.pickle"), 1: filepath.Join(ddp, "snapshot_rank1_683.pickle")}
	f := newStandin(t)
	// Each worker's snapshot, by rank: a link to the real file.
	snaps := t.TempDir()
	for rank, p := range real {
		if err := os.Symlink(p, filepath.Join(snaps, fmt.Sprintf("rank%d.pickle", rank))); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "rec")
	worker := writeScript(t, t.TempDir(), "rec_ddp.py", "import os, torch\nos.write(1, b'pid %d rank %s\\n' % (os.getpid(), os.environ['RANK'].encode()))\ntorch.cuda.init()\n")
	run := writeScript(t, t.TempDir(), "run.py", launcher)
	code, stdout, stderr := runTorchmem(t, f.env, "", "record", "-o", out, "--", py, run, worker, "2", filepath.Join(snaps, "rank{rank}.pickle"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	pids := workerPids(t, stdout)
	var want []string
	for rank, pid := range pids {
		want = append(want, fmt.Sprintf("snapshot_rank%d_%d.pickle", rank, pid), fmt.Sprintf("report_rank%d_%d.html", rank, pid))
	}
	want = append(want, "report.html")
	sort.Strings(want)
	if got := dirFiles(t, out); !slices.Equal(got, want) {
		t.Fatalf("files %q, want %q", got, want)
	}

	text := analyzeText(t, out)
	if !strings.Contains(stderr, text) {
		t.Errorf("stderr lacks what analyze %s prints:\n%s\nstderr:\n%s", out, text, stderr)
	}
	if head := "2 devices of 2 inputs: rank 1 peaked highest, 1.50 GiB on cuda:0, 1.55× the peak of rank 0 cuda:0\n(993 MiB).\n"; !strings.HasPrefix(text, head) {
		t.Errorf("headline %q; want %q", text[:min(len(text), 200)], head)
	}
	var doc struct {
		Rollup struct {
			Worst struct {
				Rank      int
				PeakBytes int64 `json:"peak_bytes"`
			}
			Imbalance float64
			Ranks     []struct{ Rank, Pid int }
		}
	}
	if err := json.Unmarshal([]byte(mustRun(t, nil, "analyze", "--format", "json", out)), &doc); err != nil {
		t.Fatal(err)
	}
	ru := doc.Rollup
	if ru.Worst.Rank != 1 || ru.Worst.PeakBytes != 1611940864 || ru.Imbalance != 1.5477 || len(ru.Ranks) != 2 || ru.Ranks[1].Pid != pids[1] {
		t.Errorf("roll-up %+v; want rank 1 worst at 1,611,940,864 B, imbalance 1.5477, two ranks", ru)
	}
	for _, line := range []string{
		fileLine(fmt.Sprintf("snapshot_rank1_%d.pickle", pids[1]), "at exit (rank 1 in the roll-up above)"),
		fileLine("report.html", "the roll-up of the 2 processes ("),
		fileLine("report_rank{R}_{pid}.html", "the HTML report of each process's file analysed above (2 of 2)"),
	} {
		if !strings.Contains(stderr, strings.TrimSuffix(line, "\n")) {
			t.Errorf("stderr lacks %q", line)
		}
	}

	page, _ := os.ReadFile(filepath.Join(out, "report.html"))
	for rank, pid := range pids {
		name := fmt.Sprintf("report_rank%d_%d.html", rank, pid)
		if !strings.Contains(string(page), `<a class="rank-page" href="`+name+`">its own page</a>`) {
			t.Errorf("report.html does not link %s", name)
		}
		own, _ := os.ReadFile(filepath.Join(out, name))
		_, alone, _ := runCLI(nil, "report", "-o", "-", filepath.Join(out, fmt.Sprintf("snapshot_rank%d_%d.pickle", rank, pid)))
		if string(own) != alone {
			t.Errorf("%s (%d bytes) is not torchmem report of rank %d's snapshot (%d bytes)", name, len(own), rank, len(alone))
		}
	}
}

// TestRecordEightRanks: a fake torchrun of 8 ranks in which rank 3 gets
// twice the tokens and runs out of memory, and rank 5's snapshot ends up
// truncated (dumped on SIGUSR1, cut short, the process gone before its exit
// dump): the roll-up on stderr names rank 5's file as unreadable and rank 3
// as the worst rank and the first OOM, with its exit snapshot after the
// OOM; the command's status is torchmem's; analyze of the folder says the
// same and exits 3, and with --strict exits 2.
func TestRecordEightRanks(t *testing.T) {
	py := needPython(t)
	f := newStandin(t)
	snaps := t.TempDir()
	for r := range 8 {
		c := st.RankConfig{Model: st.FaultyJobModel, Rank: r, LimitBytes: 420 << 20, Gen: 'G', StartSkewUS: 37}
		if r == 3 {
			c.Fault = st.RankDoubleActivations
		}
		s, oom := st.RankRun(c)
		if (oom != nil) != (r == 3) {
			t.Fatalf("rank %d: OOM %v", r, oom)
		}
		if err := os.WriteFile(filepath.Join(snaps, fmt.Sprintf("rank%d.pickle", r)), st.Marshal(s.Snapshot(), 4), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "rec")
	worker := writeScript(t, t.TempDir(), "train.py", `import os, signal, torch
rank = int(os.environ["RANK"])
os.write(1, b"pid %d rank %d\n" % (os.getpid(), rank))  # one write: the ranks print at once
torch.cuda.init()
if rank == 3:
    torch.cuda._standin_oom(64 << 20)
if rank == 5:
    os.kill(os.getpid(), signal.SIGUSR1)  # the hook dumps the snapshot
    path = os.path.join(os.environ["TORCHMEM_RECORD_DIR"], "snapshot_rank5_%d.pickle" % os.getpid())
    os.truncate(path, os.path.getsize(path) // 2)
    os._exit(0)  # gone before its exit dump
`)
	run := writeScript(t, t.TempDir(), "run.py", launcher)
	code, stdout, stderr := runTorchmem(t, f.env, "", "record", "-o", out, "--", py, run, worker, "8", filepath.Join(snaps, "rank{rank}.pickle"))
	if code != 1 {
		t.Fatalf("exit %d, want 1 (rank 3's uncaught OOM): %s", code, stderr)
	}
	pids := workerPids(t, stdout)
	bad := filepath.Join(out, fmt.Sprintf("snapshot_rank5_%d.pickle", pids[5]))
	files := dirFiles(t, out)
	pages := 0
	for _, n := range files {
		if strings.HasPrefix(n, "report_rank") {
			pages++
		}
	}
	if len(files) != 8+1+1+7 || pages != 7 || slices.Contains(files, fmt.Sprintf("report_rank5_%d.html", pids[5])) {
		t.Errorf("files %q; want 8 snapshots, rank 3's OOM snapshot, report.html and a page for each rank but 5", files)
	}

	code, text, errText := runCLI(nil, "analyze", out)
	if code != exitPartial || !strings.Contains(stderr, text) {
		t.Errorf("analyze %s: exit %d (want 3): %s\nrecord's stderr lacks its roll-up:\n%s\nstderr:\n%s", out, code, errText, text, stderr)
	}
	oomName := fmt.Sprintf("oom_snapshot_rank3_%d.pickle", pids[3])
	for _, want := range []string{
		"7 devices of 8 inputs (1 file of a process already counted): rank 3 peaked highest",
		"the first was rank 3 on cuda:3 (by time)",
		"1 input could not be read; the roll-up is of the other 8 inputs: rank 5: " + bad + ": truncated pickle",
		fmt.Sprintf("rank 3 (pid %d): %s, after the OOM", pids[3], filepath.Join(out, fmt.Sprintf("snapshot_rank3_%d.pickle", pids[3]))),
		"── rank 3 ── " + filepath.Join(out, oomName),
	} {
		if !strings.Contains(strings.Join(strings.Fields(text), " "), want) { // lines wrapped anywhere
			t.Errorf("the roll-up lacks %q:\n%s", want, text)
		}
	}
	if line := fileLine(oomName, "out of memory, dumped before the error was raised (rank 3 in the roll-up above)"); !strings.Contains(stderr, line) {
		t.Errorf("stderr lacks %q", line)
	}
	code, _, errText = runCLI(nil, "analyze", "--strict", out)
	if code != exitInput || !strings.HasPrefix(errText, "torchmem: "+bad+": truncated pickle") || strings.Count(errText, "\n") != 1 {
		t.Errorf("--strict: exit %d, stderr %q; want 2 and rank 5's file", code, errText)
	}
}

// TestRecordRealOOM: record of a program whose OOM observer and exit dump
// hand the hook the real snapshots of ../shared/recorded/record_oom: one
// process, so one rank, its OOM snapshot analysed first (as a single file),
// and the folder then reads as that one rank with the exit snapshot after
// the OOM.
func TestRecordRealOOM(t *testing.T) {
	py := needPython(t)
	src := st.SharedDir(t, filepath.Join("recorded", "record_oom"))
	f := newStandin(t)
	env := append(f.env, "TORCHMEM_STANDIN_SNAPSHOT="+filepath.Join(src, "snapshot_rank0_590.pickle"),
		"TORCHMEM_STANDIN_OOM_SNAPSHOT="+filepath.Join(src, "oom_snapshot_rank0_590.pickle"))
	out := filepath.Join(t.TempDir(), "rec")
	script := writeScript(t, t.TempDir(), "rec_oom.py", "import os, torch\nprint('pid', os.getpid())\ntorch.cuda.init()\ntorch.cuda._standin_oom(2147483648)\n")
	code, stdout, stderr := runTorchmem(t, env, "", "record", "-o", out, "--", py, script)
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, stderr)
	}
	pid := pidOf(t, stdout)
	oomName, exitName := fmt.Sprintf("oom_snapshot_rank0_%d.pickle", pid), fmt.Sprintf("snapshot_rank0_%d.pickle", pid)
	if got, want := dirFiles(t, out), []string{oomName, "report.html", exitName}; !slices.Equal(got, want) {
		t.Errorf("files %q, want %q", got, want)
	}
	if !strings.Contains(stderr, analyzeText(t, filepath.Join(out, oomName))) ||
		!strings.Contains(stderr, fileLine(oomName, "out of memory, dumped before the error was raised (analysed above)")) {
		t.Errorf("stderr lacks the analysis of the OOM snapshot first:\n%s", stderr)
	}
	text := strings.Join(strings.Fields(mustRun(t, nil, "analyze", out)), " ")
	for _, want := range []string{"1 device of 2 inputs (1 file of a process already counted): rank 0 peaked highest, 4.31 GiB",
		"first OOM: rank 0 cuda:0: 2.00 GiB requested", exitName + ", after the OOM"} {
		if !strings.Contains(text, want) {
			t.Errorf("analyze %s lacks %q", out, want)
		}
	}
}
