package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/torchmem/torchmem/analysis"
)

// hostile are strings a baseline JSON can carry: terminal escapes (ESC, BEL,
// the raw 8-bit C1 bytes CSI 0x9b, OSC 0x9d, ST 0x9c), GitHub workflow
// commands (at a line start, after spaces, the legacy ##[ form anywhere),
// HTML for Markdown, and bytes that are not UTF-8.
var hostile = []string{
	"\x1b]0;pwned\a\x1b[31mred",
	"::error::pwned",
	"  ::warning file=x::pwned",
	"##[error]pwned",
	"<img src=x onerror=alert(1)>",
	"\x9b31m\x9d0;t\x9c",
	"\xff\xfe bad utf-8",
	"word " + strings.Repeat("x", 95) + "::error::cut",
}

// inert reports why out is not inert for a terminal, a CI log or Markdown
// ("" when it is).
func inert(out string, markdown bool) string {
	if !utf8.ValidString(out) {
		return "invalid UTF-8"
	}
	for _, r := range out {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "control character " + string(r)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " \t"), "::") {
			return "workflow command line " + line
		}
		if strings.Contains(line, "##[") {
			return "legacy workflow command " + line
		}
	}
	if markdown {
		// Outside code spans (whose text Markdown never reads as HTML; a
		// backtick from the input cannot close them: mdCode replaces it).
		parts := strings.Split(out, "`")
		for i := 0; i < len(parts); i += 2 {
			if strings.Contains(parts[i], "<") {
				return "raw HTML: " + parts[i]
			}
		}
	}
	return ""
}

// hostileResult is an analysis whose every string from the file is s.
func hostileResult(s string, peak int64) *analysis.Result {
	cats := analysis.Categories{analysis.Activation: peak}
	return &analysis.Result{Schema: analysis.SchemaID,
		Input: analysis.Input{Path: s, Format: s, Generation: s, Recording: s},
		Devices: []analysis.DeviceResult{{Device: 0, Kind: s,
			Peak:     analysis.Peak{AllocatedBytes: peak, Phase: analysis.Phase(s), Categories: cats},
			AtEnd:    analysis.State{AllocatedBytes: peak / 2, Categories: cats},
			OOM:      &analysis.OOM{RequestedBytes: 1 << 20, Phase: analysis.Phase(s), Site: s, Verdict: s},
			Phases:   []analysis.PhaseSpan{{Phase: analysis.Phase(s), Step: 1, PeakAllocatedBytes: peak, Events: 1}},
			TopSites: []analysis.Site{{Site: s, Bytes: peak, Count: 1}}}},
		Leaks: []analysis.Leak{{Kind: s, Device: 0, Site: s, BytesPerStep: peak / 10, Steps: 3, Confidence: analysis.Confidence(s), Evidence: s}},
	}
}

// TestDiffOutputsInert: a diff of a baseline whose strings are hostile
// prints them through the same escaping as the analysis outputs, in text
// and Markdown (they reached the terminal raw: input.format, peak.phase,
// the leak kind).
func TestDiffOutputsInert(t *testing.T) {
	for _, s := range hostile {
		base := hostileResult(s, 3<<30)
		d := analysis.Diff(base, hostileResult("new.json", 4<<30))
		for _, f := range []struct {
			name     string
			markdown bool
			write    func(*bytes.Buffer) error
		}{
			{"text", false, func(b *bytes.Buffer) error { return DiffText(b, d) }},
			{"markdown", true, func(b *bytes.Buffer) error { return DiffMarkdown(b, d) }},
		} {
			var b bytes.Buffer
			if err := f.write(&b); err != nil {
				t.Fatal(err)
			}
			if why := inert(b.String(), f.markdown); why != "" {
				t.Errorf("%s of %q: %s\n%s", f.name, s, why, b.String())
			}
		}
	}
}
