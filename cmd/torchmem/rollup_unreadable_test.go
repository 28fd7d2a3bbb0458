package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// unreadableOf reads a roll-up's JSON: its inputs' paths and what it lists
// as unreadable ("rank path: error", rank -1 when the name has none).
func unreadableOf(t *testing.T, doc string) (inputs []string, unreadable []string) {
	t.Helper()
	var d struct {
		Inputs []struct{ Input struct{ Path string } }
		Rollup struct {
			Unreadable []struct {
				Path  string
				Rank  *int
				Error string
			}
		}
	}
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatalf("%v: %.300s", err, doc)
	}
	for _, in := range d.Inputs {
		inputs = append(inputs, in.Input.Path)
	}
	for _, u := range d.Rollup.Unreadable {
		rank := -1
		if u.Rank != nil {
			rank = *u.Rank
		}
		unreadable = append(unreadable, fmt.Sprintf("%d %s %s", rank, u.Path, u.Error))
	}
	return inputs, unreadable
}

// TestRollupSurvivesBadInputs: a rank whose file cannot be read (a
// truncated pickle; for merge, a summary of another schema, an empty list,
// a roll-up without inputs) is listed in the roll-up with its reason, the
// other ranks are rolled up, and the exit status is 3; --strict stops at the
// first (exit 2), and so does a run in which no input could be read, which
// writes nothing. Merging the roll-up's JSON again lists the bad rank again.
func TestRollupSurvivesBadInputs(t *testing.T) {
	t.Chdir(t.TempDir())
	job := writeFaultyJob(t, ".")
	bad := filepath.Join(job, "oom_snapshot_rank5.pickle")
	data, _ := os.ReadFile(bad)
	if err := os.WriteFile(bad, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}

	code, text, stderr := runCLI(nil, "analyze", job)
	if code != exitPartial {
		t.Fatalf("exit %d, want 3: %s", code, stderr)
	}
	head := "1 input could not be read; the roll-up is of the other 7 inputs:\n  rank 5: job/oom_snapshot_rank5.pickle: truncated pickle"
	if !strings.Contains(text, head) || strings.Count(text, "\n     5 cuda:5") != 0 || strings.Count(text, " cuda:") < 7 {
		t.Errorf("the roll-up does not list rank 5 as unreadable, or has a row for it:\n%s", text)
	}
	if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "torchmem: job/oom_snapshot_rank5.pickle: truncated pickle") ||
		lines[1] != "torchmem: 1 input of 8 could not be read (listed in the roll-up; --strict stops at the first)" {
		t.Errorf("stderr %q", stderr)
	}

	code, js, _ := runCLI(nil, "analyze", "--format", "json", job)
	inputs, unreadable := unreadableOf(t, js)
	if code != exitPartial || len(inputs) != 7 || len(unreadable) != 1 || !strings.HasPrefix(unreadable[0], "5 job/oom_snapshot_rank5.pickle truncated pickle") {
		t.Errorf("exit %d, inputs %q, unreadable %q; want 3, 7 inputs, rank 5's file", code, inputs, unreadable)
	}
	// Merged again, the roll-up is the same (the bad rank listed again).
	if err := os.WriteFile("rollup.json", []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"text", "markdown", "json"} {
		_, want, _ := runCLI(nil, "analyze", "--format", format, job)
		if code, got, stderr := runCLI(nil, "merge", "--format", format, "rollup.json"); code != exitOK || got != want {
			t.Errorf("%s: merge of the roll-up: exit %d (%s), differs: %s", format, code, stderr, firstDiff(got, want))
		}
	}

	code, _, stderr = runCLI(nil, "report", "-o", "job.html", job)
	page, _ := os.ReadFile("job.html")
	if code != exitPartial || !strings.Contains(string(page), `<div id="tm-unreadable"><p class="verdict">1 input could not be read`) ||
		!strings.Contains(string(page), "rank 5: job/oom_snapshot_rank5.pickle: truncated pickle") {
		t.Errorf("report: exit %d (%s); the page does not list rank 5", code, stderr)
	}

	code, out, stderr := runCLI(nil, "analyze", "--strict", job)
	if code != exitInput || out != "" || !strings.HasPrefix(stderr, "torchmem: job/oom_snapshot_rank5.pickle: truncated pickle") {
		t.Errorf("--strict: exit %d, stdout %q, stderr %q; want 2, nothing, rank 5's error", code, out, stderr)
	}
	os.WriteFile(filepath.Join(job, "oom_snapshot_rank6.pickle"), data[:100], 0o644)
	for _, f := range []string{"oom_snapshot_rank0", "oom_snapshot_rank1", "oom_snapshot_rank2", "oom_snapshot_rank3", "oom_snapshot_rank4", "oom_snapshot_rank7"} {
		os.Remove(filepath.Join(job, f+".pickle"))
	}
	code, out, stderr = runCLI(nil, "analyze", "--format", "json", job)
	if code != exitInput || out != "" || strings.Count(stderr, "\n") != 3 || !strings.HasSuffix(stderr, "torchmem: none of the 2 inputs could be read\n") {
		t.Errorf("none readable: exit %d, stdout %q, stderr %q; want 2, nothing, both named", code, out, stderr)
	}
}

// TestMergeSurvivesBadSummaries: merge lists the summaries it cannot read
// with their reasons and rolls up the rest (exit 3); a file that holds no
// analysis — an empty list, a roll-up without inputs, an empty file — is
// such a summary, and alone it exits 2.
func TestMergeSurvivesBadSummaries(t *testing.T) {
	t.Chdir(t.TempDir())
	job := writeFaultyJob(t, ".")
	if err := os.MkdirAll("s", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"0", "1", "2"} {
		js := mustRun(t, nil, "analyze", "--format", "json", filepath.Join(job, "oom_snapshot_rank"+r+".pickle"))
		os.WriteFile(filepath.Join("s", "rank"+r+".json"), []byte(js), 0o644)
	}
	files := map[string]string{
		"empty_list.json":      "[]",
		"no_inputs.json":       `{"schema": "torchmem.rollup/v1", "inputs": [], "rollup": {}}`,
		"diff.json":            `{"schema": "torchmem.diff/v1", "base": {}}`,
		"empty.json":           "",
		"truncated_rank4.json": `{"schema": "torchmem.analysis/v1", "input": {"path": "x`,
	}
	for name, body := range files {
		os.WriteFile(name, []byte(body), 0o644)
	}
	args := []string{"merge", "--format", "json", "s/rank0.json", "diff.json", "s/rank1.json", "empty_list.json", "no_inputs.json", "empty.json", "truncated_rank4.json", "s/rank2.json"}
	code, out, stderr := runCLI(nil, args...)
	inputs, unreadable := unreadableOf(t, out)
	want := []string{
		`-1 diff.json schema "torchmem.diff/v1": want torchmem.analysis/v1 (torchmem analyze --format json) or torchmem.rollup/v1 at byte offset 0`,
		"-1 empty_list.json no analysis in the file (an empty list, or a roll-up without inputs)",
		"-1 no_inputs.json no analysis in the file (an empty list, or a roll-up without inputs)",
		"-1 empty.json no torchmem JSON in the file (empty)",
		"4 truncated_rank4.json truncated JSON at byte offset 42", // where the value cut off starts
	}
	if code != exitPartial || strings.Join(inputs, " ") != "job/oom_snapshot_rank0.pickle job/oom_snapshot_rank1.pickle job/oom_snapshot_rank2.pickle" ||
		strings.Join(unreadable, "\n") != strings.Join(want, "\n") {
		t.Errorf("exit %d, inputs %q\nunreadable %q\nwant       %q\nstderr %s", code, inputs, unreadable, want, stderr)
	}
	if !strings.HasSuffix(stderr, "torchmem: 5 inputs of 8 could not be read (listed in the roll-up; --strict stops at the first)\n") {
		t.Errorf("stderr %q", stderr)
	}
	if code, out, stderr := runCLI(nil, append([]string{"merge", "--strict"}, args[3:]...)...); code != exitInput || out != "" ||
		stderr != "torchmem: diff.json: schema \"torchmem.diff/v1\": want torchmem.analysis/v1 (torchmem analyze --format json) or torchmem.rollup/v1 at byte offset 0\n" {
		t.Errorf("--strict: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	for name := range files {
		if code, out, stderr := runCLI(nil, "merge", name); code != exitInput || out != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "torchmem: "+name+": ") {
			t.Errorf("merge %s alone: exit %d, stdout %q, stderr %q; want 2 and one line", name, code, out, stderr)
		}
	}
}

// TestRecordFolderIsOneRun: the folders torchmem record wrote on a GPU
// (../shared/recorded) are one run for analyze, report and merge alike: the
// OOM run is one rank, its OOM snapshot, with its exit snapshot listed
// after the OOM (it was rank 0 twice); merging the files' own summaries
// gives, byte for byte, what analysing the folder gives.
func TestRecordFolderIsOneRun(t *testing.T) {
	dir := shared(t, "recorded", "record_oom")
	t.Chdir(filepath.Dir(filepath.Dir(dir)))
	folder := filepath.Join("recorded", "record_oom")
	text := mustRun(t, nil, "analyze", folder)
	flat := strings.Join(strings.Fields(text), " ")
	for _, want := range []string{
		"1 device of 2 inputs (1 file of a process already counted): rank 0 peaked highest, 4.31 GiB on cuda:0.",
		"1 device ran out of memory; the first was rank 0 on cuda:0 (by time).",
		"rank 0 (pid 590): recorded/record_oom/snapshot_rank0_590.pickle, after the OOM (its history holds the OOM; 4.06 GiB allocated when it was written)",
		"── rank 0 ── recorded/record_oom/oom_snapshot_rank0_590.pickle",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("analyze %s lacks %q:\n%s", folder, want, text)
		}
	}
	if strings.Contains(text, "appears in 2 inputs") || strings.Count(text, "── rank") != 1 {
		t.Errorf("rank 0 counted twice:\n%s", text)
	}
	var summaries []string
	for _, name := range []string{"oom_snapshot_rank0_590.pickle", "snapshot_rank0_590.pickle"} {
		p := filepath.Join(t.TempDir(), name+".json")
		if err := os.WriteFile(p, []byte(mustRun(t, nil, "analyze", "--format", "json", filepath.Join(folder, name))), 0o644); err != nil {
			t.Fatal(err)
		}
		summaries = append(summaries, p)
	}
	for _, format := range []string{"text", "markdown", "json"} {
		want := mustRun(t, nil, "analyze", "--format", format, folder)
		if got := mustRun(t, nil, append([]string{"merge", "--format", format}, summaries...)...); got != want {
			t.Errorf("%s: merge of the summaries differs from analyze of the folder: %s", format, firstDiff(got, want))
		}
	}
	if code, _, stderr := runCLI(nil, "report", "-o", filepath.Join(t.TempDir(), "r.html"), folder); code != exitOK {
		t.Errorf("report %s: exit %d: %s", folder, code, stderr)
	}
}
