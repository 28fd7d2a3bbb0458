package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/diff"
	"github.com/torchmem/torchmem/result"
)

func TestChange(t *testing.T) {
	cases := []struct {
		d    diff.Delta
		want string
	}{
		{diff.NewDelta(1<<30, 1<<30), "0 B"},
		{diff.NewDelta(1<<30, 3<<29), "+512 MiB (+50.0%)"},
		{diff.NewDelta(4<<30, 3<<30), "-1.00 GiB (-25.0%)"},
		{diff.NewDelta(0, 20<<20), "+20.0 MiB (was 0)"},
	}
	for _, c := range cases {
		if got := Change(c.d); got != c.want {
			t.Errorf("Change(%+v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestDiffMarkdownEscapes(t *testing.T) {
	d := diff.Diff(
		&result.Result{Input: result.Input{Path: "a`b|c.pickle"}, Devices: []result.DeviceResult{{Device: 0, Kind: "cuda",
			TopSites: []result.Site{{Site: "x.py:1 f|<script>`", Bytes: 10}}}}},
		&result.Result{Input: result.Input{Path: "new"}, Devices: []result.DeviceResult{{Device: 0, Kind: "cuda"}}})
	var md bytes.Buffer
	if err := DiffMarkdown(&md, d); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(md.String(), "\n") {
		if strings.Contains(line, "x.py") && strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") != 7 {
			t.Errorf("site row broken: %q", line)
		}
	}
	if strings.Contains(md.String(), "a`b") {
		t.Errorf("backtick in a path breaks the code span:\n%s", md.String())
	}
}
