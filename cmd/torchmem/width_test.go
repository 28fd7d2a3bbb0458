package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/report"
	"github.com/torchmem/torchmem/result"
)

// TestTextWidthEveryRealFile: the text output of every command fits
// report.TextWidth (100) columns on every real file, and each command exits
// with its code: 0 for analyze, info and diff; for check 1 exactly when a
// check failed, else 0.
func TestTextWidthEveryRealFile(t *testing.T) {
	base := shared(t, "snapshots", "nothanmin_fullstep.pickle")
	for _, f := range st.SharedInputs(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			for _, args := range [][]string{
				{"analyze", f},
				{"analyze", "--top", "12", f},
				{"info", f},
				{"diff", base, f},
				{"diff", f, base},
				{"check", "-b", "peak=1GiB", "-b", "leaks=0", "-b", "phase:forward=1MiB", "--baseline", base, f},
			} {
				code, out, stderr := runCLI(nil, args...)
				// analyze, info and diff succeed; check fails (exit 1, saying
				// so on stderr) exactly when it lists a failed check.
				want := exitOK
				if failed := strings.Contains(out, "\n  fail  "); args[0] == "check" && failed {
					want = exitFailed
					if !strings.HasPrefix(stderr, "torchmem: check failed: ") {
						t.Errorf("%v: failed without saying so: %q", args, stderr)
					}
				}
				if code != want || strings.Contains(stderr, "internal error") {
					t.Fatalf("%v: exit %d, want %d: %s", args, code, want, stderr)
				}
				for i, l := range strings.Split(out, "\n") {
					if n := utf8.RuneCountInString(l); n > report.TextWidth {
						t.Errorf("%s: line %d has %d columns: %q", args[0], i+1, n, l)
					}
				}
			}
		})
	}
}

// TestTopInText: analyze's text lists 5 sites unless --top says otherwise.
func TestTopInText(t *testing.T) {
	f := shared(t, "snapshots", "genC_torch2.2_nesta_OOM_pickle_named_json.pickle")
	sites := func(out string) int {
		_, rest, _ := strings.Cut(out, "  top sites\n")
		n := 0
		for _, l := range strings.Split(rest, "\n") {
			if !strings.HasPrefix(l, "    ") || strings.HasPrefix(l, "    …") {
				break
			}
			n++
		}
		return n
	}
	for _, c := range []struct {
		args []string
		want int
		more string
	}{
		{nil, 5, "    … 5 more sites (--top 10 lists them)\n"},
		{[]string{"--top", "3"}, 3, ""},
		{[]string{"--top", "8"}, 8, ""},
		{[]string{"--top", "1000"}, -1, ""}, // every site live at the OOM, as JSON lists them
	} {
		if c.want < 0 {
			_, js, _ := runCLI(nil, "analyze", "--format", "json", "--top", "1000", f)
			var r result.Result
			if err := json.Unmarshal([]byte(js), &r); err != nil {
				t.Fatal(err)
			}
			c.want = len(r.Devices[0].TopSites)
		}
		code, out, stderr := runCLI(nil, append(append([]string{"analyze"}, c.args...), f)...)
		if code != exitOK {
			t.Fatalf("exit %d %s", code, stderr)
		}
		if got := sites(out); got != c.want || c.more != "" && !strings.Contains(out, c.more) || c.more == "" && strings.Contains(out, "    … ") {
			t.Errorf("%v: %d sites listed, want %d\n%s", c.args, got, c.want, out)
		}
	}
	code, _, stderr := runCLI(nil, "analyze", "--top", "0", f)
	if want := "--top 0: want at least 1"; code != exitInput || !strings.Contains(stderr, want) {
		t.Errorf("--top 0: exit %d, %q", code, stderr)
	}
}
