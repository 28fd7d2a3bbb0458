package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/rollup"
	"github.com/torchmem/torchmem/snapshot"
)

// FuzzMergeReader: merge's reader on any stream of JSON — seeded with
// analyses and a roll-up whose strings are hostile — ends in analyses that
// pass Validate or in one line naming the file (never a panic); the
// roll-up of what it read prints inert in text and Markdown.
func FuzzMergeReader(f *testing.F) {
	for _, s := range []string{"model.py:3 forward", "\x1b]0;t\a\x1b[31m", "::error::pwned", "<img src=x onerror=alert(1)>", "\x9b31m\x9d0;t\x9c"} {
		a := fuzzResult(s, 3<<30)
		f.Add(a)
		f.Add([]byte(`{"schema": "torchmem.rollup/v1", "inputs": [` + string(a) + `,` + string(fuzzResult("b", 1<<20)) + `], "rollup": {}}`))
	}
	f.Add([]byte(`[` + string(fuzzResult("a", 1)) + `] {"schema": "torchmem.analysis/v1", "devices": [{"phases": [{}, {}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var rs []*result.Result
		err := rollup.ReadSummaries(bytes.NewReader(data), "in.json", 1<<20, func(r *result.Result) error {
			if err := r.Validate(); err != nil {
				t.Fatalf("an analysis that does not validate was handed on: %v", err)
			}
			rs = append(rs, r)
			return nil
		})
		if err != nil {
			if !snapshot.IsInputError(err) || strings.ContainsAny(err.Error(), "\r\n") || !strings.Contains(err.Error(), "in.json") {
				t.Fatalf("error %q (%T): want one line naming the file", err, err)
			}
			return
		}
		for _, format := range []string{"text", "markdown"} {
			var out bytes.Buffer
			ro, err := newRollupOutput(&out, format, "all", 5)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				if err := ro.add(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := ro.finish(io.Discard); err != nil {
				t.Fatal(err)
			}
			own := strings.NewReplacer("<details>", "", "</details>", "", "<summary>", "", "</summary>", "", "<code>", "", "</code>", "")
			if why := st.NotInert(own.Replace(out.String()), format == "markdown"); why != "" {
				t.Fatalf("merge --format %s: %s", format, why)
			}
		}
	})
}
