package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/diff"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
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

// hostileResult is an analysis whose every string from the file is s.
func hostileResult(s string, peak int64) *result.Result {
	cats := result.Categories{result.Activation: peak}
	return &result.Result{Schema: result.SchemaID,
		Input: result.Input{Path: s, Format: s, Generation: s, Recording: s},
		Devices: []result.DeviceResult{{Device: 0, Kind: s,
			Peak:     result.Peak{AllocatedBytes: peak, Phase: result.Phase(s), Categories: cats},
			AtEnd:    result.State{AllocatedBytes: peak / 2, Categories: cats},
			OOM:      &result.OOM{RequestedBytes: 1 << 20, Phase: result.Phase(s), Site: s, Verdict: s},
			Phases:   []result.PhaseSpan{{Phase: result.Phase(s), Step: 1, PeakAllocatedBytes: peak, Events: 1}},
			TopSites: []result.Site{{Site: s, Bytes: peak, Count: 1}}}},
		Leaks: []result.Leak{{Kind: s, Device: 0, Site: s, BytesPerStep: peak / 10, Steps: 3, Confidence: result.Confidence(s), Evidence: s}},
	}
}

// TestDiffOutputsInert: a diff of a baseline whose strings are hostile
// prints them through the same escaping as the analysis outputs, in text
// and Markdown (they reached the terminal raw: input.format, peak.phase,
// the leak kind).
func TestDiffOutputsInert(t *testing.T) {
	for _, s := range hostile {
		base := hostileResult(s, 3<<30)
		d := diff.Diff(base, hostileResult("new.json", 4<<30))
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
			if why := snapshottest.NotInert(b.String(), f.markdown); why != "" {
				t.Errorf("%s of %q: %s\n%s", f.name, s, why, b.String())
			}
		}
	}
}
