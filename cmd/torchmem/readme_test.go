package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readmeBlock returns the lines of the fenced block that follows the
// marker comment "<!-- readme-test: NAME -->" in the README.
func readmeBlock(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	marker := "<!-- readme-test: " + name + " -->\n"
	_, rest, ok := strings.Cut(string(data), marker)
	if !ok {
		t.Fatalf("README has no %q", strings.TrimSpace(marker))
	}
	open, rest, _ := strings.Cut(rest, "\n")
	if !strings.HasPrefix(open, "```") {
		t.Fatalf("%s: no fenced block after the marker", name)
	}
	body, _, ok := strings.Cut(rest, "\n```\n")
	if !ok {
		t.Fatalf("%s: the block does not end", name)
	}
	return strings.Split(body, "\n")
}

// readmeCommands returns the torchmem command lines of a README block, as
// argument lists (they use no quoting).
func readmeCommands(lines []string) [][]string {
	var cmds [][]string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "torchmem" {
			cmds = append(cmds, f[1:])
		}
	}
	return cmds
}

// matchExcerpt checks that the lines of a README output excerpt appear in
// got in order; a line "…" stands for any number of lines left out, and
// consecutive excerpt lines must be consecutive in got. It returns the
// first excerpt line that does not match, or "".
func matchExcerpt(excerpt []string, got string) string {
	out := strings.Split(got, "\n")
	i := 0
	anywhere := false
	for _, want := range excerpt {
		if want == "…" {
			anywhere = true
			continue
		}
		for anywhere && i < len(out) && out[i] != want {
			i++
		}
		if i >= len(out) || out[i] != want {
			return want
		}
		i++
		anywhere = false
	}
	return ""
}

// checkExcerpt fails the test when the README's output block name is not
// what torchmem printed.
func checkExcerpt(t *testing.T, name, got string) {
	t.Helper()
	if bad := matchExcerpt(readmeBlock(t, name), got); bad != "" {
		t.Errorf("README output %q: line %q is not what torchmem prints here:\n%s", name, bad, got)
	}
}

// TestReadmeCIWalkthrough runs the README's "Use in CI" walk-through on real
// snapshots: a baseline from a run with 128-token sequences, the same model
// with 256-token sequences as the changed run, and an OOM snapshot as the
// run that ran out of memory. The commands are read from the README and
// the outputs it shows must be what torchmem prints.
func TestReadmeCIWalkthrough(t *testing.T) {
	base := shared(t, "snapshots", "wedsonlin_medium_128_training.pickle")
	changed := shared(t, "snapshots", "wedsonlin_medium_256_training.pickle")
	oom := shared(t, "snapshots", "genC_torch2.2_nesta_OOM_pickle_named_json.pickle")
	cmds := readmeCommands(readmeBlock(t, "commands"))
	if len(cmds) != 2 || !strings.Contains(strings.Join(cmds[0], " "), "--update-baseline") {
		t.Fatalf("README walk-through commands: %q", cmds)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("ci", 0o755); err != nil {
		t.Fatal(err)
	}
	record := func(src string) {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("memory.pickle", data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// On main: the baseline.
	record(base)
	code, out, stderr := runCLI(nil, cmds[0]...)
	if code != exitOK || !strings.HasPrefix(out, "torchmem check: wrote the baseline ci/memory-baseline.json from memory.pickle") {
		t.Fatalf("baseline: exit %d\n%s%s", code, out, stderr)
	}
	// The same run against its own baseline passes.
	if code, out, _ := runCLI(nil, cmds[1]...); code != exitOK {
		t.Errorf("unchanged run: exit %d\n%s", code, out)
	}
	// The changed run fails and says what grew.
	record(changed)
	code, out, stderr = runCLI(nil, cmds[1]...)
	if code != exitFailed || !strings.HasPrefix(stderr, "torchmem: check failed: ") {
		t.Errorf("changed run: exit %d, stderr %q", code, stderr)
	}
	checkExcerpt(t, "output changed", out)
	// The run that ran out of memory fails on that first.
	record(oom)
	code, out, _ = runCLI(nil, cmds[1]...)
	if code != exitFailed {
		t.Errorf("OOM run: exit %d", code)
	}
	checkExcerpt(t, "output oom", out)
	// --allow-oom skips the OOM check; the comparison still fails.
	code, out, _ = runCLI(nil, append(cmds[1], "--allow-oom")...)
	if code != exitFailed || !strings.Contains(out, "  skip  device 0 (allowed by --allow-oom): Out of memory in forward") {
		t.Errorf("--allow-oom: exit %d\n%s", code, out)
	}
}

// TestMatchExcerpt keeps the README checker honest.
func TestMatchExcerpt(t *testing.T) {
	got := "a\nb\nc\nd\n"
	ok := [][]string{{"a", "b"}, {"…", "c", "d"}, {"a", "…", "d"}, {"…"}}
	bad := [][]string{{"a", "c"}, {"b"}, {"…", "x"}, {"d", "…", "a"}}
	for _, e := range ok {
		if m := matchExcerpt(e, got); m != "" {
			t.Errorf("%q should match, fails at %q", e, m)
		}
	}
	for _, e := range bad {
		if matchExcerpt(e, got) == "" {
			t.Errorf("%q should not match", e)
		}
	}
}
