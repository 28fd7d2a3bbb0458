package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/diff"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/report"
	"github.com/torchmem/torchmem/result"
)

// fuzzResult is an analysis whose strings from the file are s.
func fuzzResult(s string, peak int64) []byte {
	r := &result.Result{Schema: result.SchemaID,
		Input: result.Input{Path: s, Format: s, Generation: s},
		Devices: []result.DeviceResult{{Device: 0, Kind: s,
			Peak:     result.Peak{AllocatedBytes: peak, Phase: result.Phase(s), Categories: result.Categories{result.Activation: peak}},
			OOM:      &result.OOM{RequestedBytes: 1 << 20, Phase: result.Phase(s), Site: s},
			Phases:   []result.PhaseSpan{{Phase: result.Phase(s), Step: 1, PeakAllocatedBytes: peak, Events: 1}},
			TopSites: []result.Site{{Site: s, Bytes: peak, Count: 1}}}},
		Leaks: []result.Leak{{Kind: s, Site: s, BytesPerStep: peak / 10, Steps: 3, Confidence: result.Confidence(s)}},
	}
	b, _ := json.Marshal(r)
	return b
}

// FuzzDiffJSON: torchmem diff on two analysis JSON files — read back as
// baselines are (result.ReadResult, within its bounds), compared, written
// as text, Markdown and JSON. Reading ends in a Result or a one-line error;
// every output is inert text; the JSON is JSON.
func FuzzDiffJSON(f *testing.F) {
	for _, s := range []string{"\x1b]0;t\a\x1b[31m", "::error::pwned", "##[error]x", "<img src=x onerror=alert(1)>", "\x9b31m\x9d0;t\x9c", "\xff bad"} {
		f.Add(fuzzResult(s, 3<<30), fuzzResult("new", 1<<20))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var rs [2]*result.Result
		for i, data := range [][]byte{a, b} {
			r, err := result.ReadResult(bytes.NewReader(data), "in.json", result.SchemaID, 1<<20)
			if err != nil {
				if strings.ContainsAny(err.Error(), "\r\n") {
					t.Fatalf("error of two lines: %q", err)
				}
				return
			}
			rs[i] = r
		}
		d := diff.Diff(rs[0], rs[1])
		var text, md, js bytes.Buffer
		if err := report.DiffText(&text, d); err != nil {
			t.Fatal(err)
		}
		if err := report.DiffMarkdown(&md, d); err != nil {
			t.Fatal(err)
		}
		if err := report.DiffJSON(&js, d); err != nil {
			t.Fatal(err)
		}
		if why := snapshottest.NotInert(text.String(), false); why != "" {
			t.Fatalf("text: %s", why)
		}
		if why := snapshottest.NotInert(md.String(), true); why != "" {
			t.Fatalf("markdown: %s", why)
		}
		if !json.Valid(js.Bytes()) {
			t.Fatalf("JSON output is not JSON")
		}
	})
}
