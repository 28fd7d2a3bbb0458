package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// checkDoc is what check --format json says of each input.
type checkDoc []struct {
	Input  struct{ Path string }
	Checks []struct {
		Key, Kind, Status, Message string
	}
	Failed, Skipped int
}

// failed lists "path key" for every failed check, and skipped the same for
// skipped ones.
func (d checkDoc) outcomes(status string) []string {
	var out []string
	for _, r := range d {
		for _, c := range r.Checks {
			if c.Status == status {
				out = append(out, filepath.Base(r.Input.Path)+" "+c.Key)
			}
		}
	}
	return out
}

func runCheck(t *testing.T, want int, args ...string) checkDoc {
	t.Helper()
	code, out, stderr := runCLI(nil, append([]string{"check", "--format", "json"}, args...)...)
	if code != want {
		t.Fatalf("check %v: exit %d, want %d: %s", args, code, want, stderr)
	}
	var doc checkDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return doc
}

// TestCheckRanks: check on the simulated 8-rank job — every budget applies
// to every rank, the imbalance budget to the roll-up of them all, and a
// baseline roll-up compares each rank with the same rank.
func TestCheckRanks(t *testing.T) {
	t.Chdir(t.TempDir())
	job := writeFaultyJob(t, ".")
	base := mustRun(t, nil, "analyze", "--format", "json", job)
	if err := os.WriteFile("base.json", []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}

	// Ranks 1 (leaking, 317 MiB) and 3 (twice the activations, 383 MiB)
	// peak over 300 MiB; ranks 3 and 6 ran out of memory.
	doc := runCheck(t, exitFailed, job, "--budget", "peak=300MiB")
	if len(doc) != 8 {
		t.Fatalf("%d results; want one per rank", len(doc))
	}
	got := strings.Join(doc.outcomes("fail"), ", ")
	want := "oom_snapshot_rank1.pickle peak, oom_snapshot_rank3.pickle oom, oom_snapshot_rank3.pickle peak, oom_snapshot_rank6.pickle oom"
	if got != want {
		t.Errorf("failed: %s\nwant: %s", got, want)
	}

	// The largest peak is 1.75× the median: over 1.2, within 2.
	doc = runCheck(t, exitFailed, job, "--allow-oom", "--budget", "imbalance=1.2")
	if last := doc[len(doc)-1]; last.Input.Path != "roll-up of 8 inputs" || last.Failed != 1 || !strings.Contains(last.Checks[0].Message, "imbalance 1.75× over the budget of 1.20×: rank 3's peak") {
		t.Errorf("imbalance check %+v", last)
	}
	runCheck(t, exitOK, job, "--allow-oom", "--budget", "imbalance=2")

	// A roll-up as input: its inputs are checked, named by their own paths.
	doc = runCheck(t, exitFailed, "base.json", "--allow-oom", "--budget", "peak=300MiB")
	if len(doc) != 8 || doc[1].Input.Path != "job/oom_snapshot_rank1.pickle" || doc[1].Failed != 1 {
		t.Errorf("roll-up input: %d results, second %+v", len(doc), doc[1])
	}

	// The baseline roll-up: rank 0 now gets twice the activations too (it
	// grew against rank 0 of the baseline); every other rank equals its
	// own baseline, rank 3 included — one baseline for all would fail them.
	if err := os.MkdirAll("pr", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range st.FaultyJob('G')[:7] {
		if c.Rank == 0 {
			c.Fault = st.RankDoubleActivations
		}
		s, _ := st.RankRun(c)
		if err := os.WriteFile(filepath.Join("pr", fmt.Sprintf("oom_snapshot_rank%d.pickle", c.Rank)), st.Marshal(s.Snapshot(), 4), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doc = runCheck(t, exitFailed, "pr", "--allow-oom", "--baseline", "base.json")
	for _, f := range doc.outcomes("fail") {
		if !strings.HasPrefix(f, "oom_snapshot_rank0.pickle ") {
			t.Errorf("failed: %s; only rank 0 grew", f)
		}
	}
	if len(doc.outcomes("fail")) == 0 || doc[0].Failed == 0 {
		t.Errorf("rank 0 grew 1.75× against its baseline and did not fail: %+v", doc[0])
	}
	// Without rank 7 in the input there is nothing to miss; a rank the
	// baseline lacks is skipped with a reason.
	data, _ := os.ReadFile(filepath.Join(job, "oom_snapshot_rank7.pickle"))
	os.WriteFile(filepath.Join("pr", "rank_9.pickle"), data, 0o644)
	doc = runCheck(t, exitFailed, "pr", "--allow-oom", "--baseline", "base.json")
	var reason string
	for _, r := range doc {
		for _, c := range r.Checks {
			if filepath.Base(r.Input.Path) == "rank_9.pickle" && c.Status == "skip" && c.Kind == "regression" {
				reason = c.Message
			}
		}
	}
	if reason != "rank 9 is not in the baseline roll-up (8 ranks)" {
		t.Errorf("rank 9 without a baseline: %q", reason)
	}

	for _, bad := range []string{"imbalance=0.9", "imbalance=x"} {
		code, _, stderr := runCLI(nil, "check", job, "--budget", bad)
		if code != exitInput || !strings.Contains(stderr, "want a ratio") {
			t.Errorf("--budget %s: exit %d, %q", bad, code, stderr)
		}
	}
}
