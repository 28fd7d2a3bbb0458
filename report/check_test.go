package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/check"
)

func TestCheckSummary(t *testing.T) {
	cases := []struct {
		c    check.Result
		want string
	}{
		{check.Result{Checks: make([]check.Item, 3), Passed: 3}, "PASS: all 3 checks passed"},
		{check.Result{Checks: make([]check.Item, 3), Passed: 2, Skipped: 1}, "PASS: 2 of 3 checks passed, 1 skipped"},
		{check.Result{Checks: make([]check.Item, 3), Passed: 1, Failed: 1, Skipped: 1}, "FAIL: 1 of 3 checks failed (1 passed, 1 skipped)"},
		{check.Result{Checks: make([]check.Item, 1), Passed: 1}, "PASS: 1 check passed"},
		{check.Result{Checks: make([]check.Item, 1), Skipped: 1}, "PASS: 0 of 1 check passed, 1 skipped"},
		{check.Result{}, "PASS: no checks (give --budget, --baseline or --config)"},
	}
	for _, c := range cases {
		if got := CheckSummary(&c.c); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
}

// TestCheckOutputsEscape keeps input strings from breaking a terminal line,
// a Markdown table or the page around it.
func TestCheckOutputsEscape(t *testing.T) {
	var text, md bytes.Buffer
	if err := CheckText(&text, gateResults()); err != nil {
		t.Fatal(err)
	}
	if err := CheckMarkdown(&md, gateResults()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "\x1b") || strings.Contains(text.String(), "%0A\n::error") {
		t.Errorf("text output carries control characters:\n%q", text.String())
	}
	for _, line := range strings.Split(md.String(), "\n") {
		if strings.HasPrefix(line, "| ") && strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") != 6 {
			t.Errorf("table row broken: %q", line)
		}
		if strings.Contains(line, "</failure>") || strings.Contains(line, "\x1b") {
			t.Errorf("unescaped input in Markdown: %q", line)
		}
	}
}
