package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/torchmem/torchmem/check"
	"github.com/torchmem/torchmem/internal/units"
)

// CheckJSON writes check results as schema torchmem.check/v1 (one object,
// or an array for several inputs).
func CheckJSON(w io.Writer, results []*check.Result) error {
	return writeJSON(w, oneOrMany(results))
}

// CheckSummary is the one line that says how a check went:
// "FAIL: 2 of 8 checks failed (5 passed, 1 skipped)".
func CheckSummary(c *check.Result) string {
	total := len(c.Checks)
	switch {
	case c.Failed > 0:
		return fmt.Sprintf("FAIL: %d of %s failed (%d passed, %d skipped)", c.Failed, plural(total, "check"), c.Passed, c.Skipped)
	case total == 0:
		return "PASS: no checks (give --budget, --baseline or --config)"
	case total == 1 && c.Passed == 1:
		return "PASS: 1 check passed"
	case c.Skipped > 0:
		return fmt.Sprintf("PASS: %d of %s passed, %d skipped", c.Passed, plural(total, "check"), c.Skipped)
	}
	return fmt.Sprintf("PASS: all %s passed", plural(total, "check"))
}

// sitesLabel introduces the sites of a failed check: those that grew most
// against the baseline, or the largest ones of a budget or an OOM.
func sitesLabel(it check.Item) string {
	switch {
	case it.Kind == check.CheckKindRegression:
		return "grew most:"
	case it.Kind == check.CheckKindOOM:
		return "largest live:"
	}
	return "largest:"
}

// sitesText lists a check's sites on one line ("grew most: a.py:1 f 1.00
// MiB → 2.00 MiB (+1.00 MiB); …"), or "" when it has none.
func sitesText(it check.Item) string {
	if len(it.Sites) == 0 {
		return ""
	}
	parts := make([]string, len(it.Sites))
	for i, s := range it.Sites {
		parts[i] = s.Describe()
	}
	return sitesLabel(it) + " " + strings.Join(parts, "; ")
}

// checkValue formats a check's measured value or limit.
func checkValue(it check.Item, v int64) string {
	if it.Key == check.BudgetLeaks {
		return units.Count(int(v))
	}
	return units.FormatBytes(v)
}

func checkSettings(c *check.Result) string {
	if c.Baseline == nil {
		return ""
	}
	return fmt.Sprintf("baseline %s, %s", c.Baseline.Path, growthRule(c))
}

// growthRule says what growth over the baseline fails: "tolerance 5%,
// noise floor the larger of 16.0 MiB and 1% of the baseline's peak".
func growthRule(c *check.Result) string {
	s := "tolerance " + c.Tolerance.String()
	if c.Floor != nil && (c.Floor.Bytes > 0 || c.Floor.PercentOfPeak > 0) {
		s += ", noise floor " + c.Floor.String()
	}
	return s
}

// CheckText writes check results for a terminal: a summary line per input,
// then one line per check.
func CheckText(w io.Writer, results []*check.Result) error {
	p := &printer{w: w}
	for i, c := range results {
		if i > 0 {
			p.f("\n")
		}
		p.wrap("", "  ", "torchmem check "+units.OneLine(c.Input.Path)+" — "+CheckSummary(c))
		if s := checkSettings(c); s != "" {
			p.wrap("  ", "    ", units.OneLine(s))
		}
		for _, it := range c.Checks {
			p.wrap(fmt.Sprintf("  %-4s  ", it.Status), "        ", units.OneLine(it.Message))
			label := sitesLabel(it) + " "
			for _, s := range it.Sites {
				p.wrap("        "+label, "          ", units.OneLine(s.Describe()))
				label = strings.Repeat(" ", utf8.RuneCountInString(label))
			}
		}
	}
	return p.err
}

func checkMark(s check.Status) string {
	switch s {
	case check.CheckFail:
		return "❌ fail"
	case check.CheckSkip:
		return "⏭️ skip"
	}
	return "✅ pass"
}

// CheckMarkdown writes check results for a pull-request comment or the
// GitHub job summary.
func CheckMarkdown(w io.Writer, results []*check.Result) error {
	p := &printer{w: w}
	for i, c := range results {
		if i > 0 {
			p.f("\n")
		}
		icon := "✅"
		if !c.OK() {
			icon = "❌"
		}
		p.f("## %s torchmem check: `%s`\n\n", icon, mdCode(FileName(c.Input.Path)))
		p.f("**%s**", mdText(CheckSummary(c)))
		if c.Baseline != nil {
			p.f(" — baseline `%s`, %s", mdCode(FileName(c.Baseline.Path)), mdText(growthRule(c)))
		}
		p.f("\n")
		if len(c.Checks) == 0 {
			continue
		}
		p.f("\n| result | check | value | limit | details |\n|---|---|---:|---:|---|\n")
		for _, it := range c.Checks {
			val, lim := "", ""
			if it.Status == check.CheckFail || it.Status == check.CheckPass && it.Kind != check.CheckKindOOM {
				val, lim = checkValue(it, it.Actual), checkValue(it, it.Limit)
			}
			details := mdText(it.Message)
			if st := sitesText(it); st != "" {
				details += " — " + mdText(st)
			}
			p.f("| %s | %s | %s | %s | %s |\n", checkMark(it.Status), mdText(it.Name), val, lim, details)
		}
	}
	return p.err
}
