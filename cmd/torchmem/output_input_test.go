package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputNeverReplacesInput: an output named like one of the inputs —
// the same path, another spelling of it, a link to it, a hard link, or a
// folder's file — is refused with one line and exit 2 before anything is
// read, and the input is left as it was (report X -o X replaced X with its
// own report).
func TestOutputNeverReplacesInput(t *testing.T) {
	dir := t.TempDir()
	demo, err := os.ReadFile(demoSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	snap := writeTemp(t, dir, "snap.pickle", demo)
	inFolder := filepath.Join(dir, "run", "rank0.pickle")
	os.MkdirAll(filepath.Dir(inFolder), 0o755)
	os.WriteFile(inFolder, demo, 0o644)
	link := filepath.Join(dir, "link.html")
	hard := filepath.Join(dir, "hard.html")
	if err := os.Symlink(snap, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(snap, hard); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := runCLI(nil, "analyze", "--format", "json", snap); code != exitOK {
		t.Fatalf("analyze: exit %d: %s", code, stderr)
	} else {
		writeTemp(t, dir, "summary.json", []byte(out))
	}
	summary := filepath.Join(dir, "summary.json")
	before, _ := os.ReadFile(summary)
	cases := []struct {
		name, input string
		args        []string
	}{
		{"report, same path", snap, []string{"report", snap, "-o", snap}},
		{"report, other spelling", snap, []string{"report", snap, "-o", filepath.Join(dir, ".", "run", "..", "snap.pickle")}},
		{"report, a link to the input", snap, []string{"report", snap, "-o", link}},
		{"report, a hard link", snap, []string{"report", snap, "-o", hard}},
		{"report, a folder's file", inFolder, []string{"report", filepath.Join(dir, "run"), snap, "-o", inFolder}},
		{"merge", summary, []string{"merge", summary, "-o", summary}},
		{"check --junit", snap, []string{"check", snap, "--budget", "peak=1TiB", "--junit", snap}},
		{"check --junit, the baseline", summary, []string{"check", snap, "--baseline", summary, "--junit", summary}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCLI(nil, c.args...)
			if code != exitInput || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "the output would replace it") {
				t.Errorf("exit %d, stderr %q; want 2 and one line saying the output is the input", code, stderr)
			}
			want := demo
			if c.input == summary {
				want = before
			}
			if got, _ := os.ReadFile(c.input); !bytes.Equal(got, want) {
				t.Errorf("the input %s was changed (%d bytes, was %d)", c.input, len(got), len(want))
			}
		})
	}
	// A new file, or standard output, is no input.
	if code, _, stderr := runCLI(nil, "report", snap, "-o", filepath.Join(dir, "new.html")); code != exitOK {
		t.Errorf("a new file: exit %d: %s", code, stderr)
	}
}
