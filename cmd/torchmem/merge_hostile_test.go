package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// hostileStrings are what a stranger's analysis JSON may hold in any string:
// terminal escapes, 8-bit C1 controls, invalid UTF-8, a workflow command, raw
// HTML.
var hostileStrings = []string{"\x1b[31m\a", "::error::pwned", "<img src=x onerror=alert(1)>", "\x9b31m\x9d\x9c", "\xff\xfe"}

// markStrings sets every string of v that is text — not one of the words
// Validate checks against their vocabulary — to "MARK" (marks counts them),
// so that the JSON can then put a hostile string, raw bytes included, in its
// place.
func markStrings(v reflect.Value, path string, marks *int) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			markStrings(v.Elem(), path, marks)
		}
	case reflect.Slice:
		for i := range v.Len() {
			markStrings(v.Index(i), path, marks)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.IsExported() && name != "-" {
				markStrings(v.Field(i), path+"."+name, marks)
			}
		}
	case reflect.String:
		switch {
		case v.Type() != reflect.TypeOf(""): // Phase, Confidence: words
		case strings.HasSuffix(path, ".schema"), strings.HasSuffix(path, ".allocated_unit"),
			strings.HasSuffix(path, "input.format"), strings.HasSuffix(path, "devices.kind"):
		default:
			v.SetString("MARK")
			*marks++
		}
	}
}

// hostileSummaries writes the analyses of a simulated job's ranks (an OOM,
// a leak, phases, suggestions, diagnostics) with every text string set to
// s, raw in the JSON, into dir, and returns their paths.
func hostileSummaries(t *testing.T, dir, s string) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, c := range st.FaultyJob('G')[:4] {
		sim, _ := st.RankRun(c)
		snap := writeTemp(t, dir, fmt.Sprintf("rank%d.pickle", c.Rank), st.Marshal(sim.Snapshot(), 4))
		var r result.Result
		if err := json.Unmarshal([]byte(mustRun(t, nil, "analyze", "--format", "json", snap)), &r); err != nil {
			t.Fatal(err)
		}
		marks := 0
		markStrings(reflect.ValueOf(&r).Elem(), "analysis", &marks)
		js, _ := json.Marshal(&r)
		hostile := strings.ReplaceAll(string(js), `"MARK"`, rawJSONString(s))
		if marks < 20 {
			t.Fatalf("only %d strings in the analysis", marks)
		}
		paths = append(paths, writeTemp(t, dir, fmt.Sprintf("rank%d.json", c.Rank), []byte(hostile)))
	}
	return paths
}

// TestMergeHostileStrings: merge prints every string of the analyses it
// reads inert in text and Markdown — the roll-up and the ranks shown in
// full (a summary that is not UTF-8 is refused, at its offset) — where the input's format, the devices' kinds and the phases went
// to the terminal raw (an ESC, a line starting ::error::, raw <img> in
// Markdown). Those words are checked against their vocabulary when read:
// a file with another is bad input (exit 2, one line naming the field), in
// merge, diff and check --baseline alike.
func TestMergeHostileStrings(t *testing.T) {
	dir := t.TempDir()
	// The Markdown's own tags, which NotInert would take for input.
	ownTags := strings.NewReplacer("<details>", "", "</details>", "", "<summary>", "", "</summary>", "", "<code>", "", "</code>", "")
	for i, s := range hostileStrings {
		paths := hostileSummaries(t, filepath.Join(dir, fmt.Sprint(i)), s)
		for _, format := range []string{"text", "markdown"} {
			code, out, stderr := runCLI(nil, append([]string{"merge", "--format", format, "--rank", "all"}, paths...)...)
			if !utf8.ValidString(s) { // not JSON torchmem writes: refused where it is
				if code != exitInput || !strings.Contains(stderr, "invalid UTF-8 at byte offset") || st.NotInert(stderr, false) != "" {
					t.Errorf("merge of invalid UTF-8: exit %d, stderr %q", code, stderr)
				}
				continue
			}
			if code != exitOK {
				t.Fatalf("merge --format %s of %q: exit %d: %s", format, s, code, stderr)
			}
			if why := st.NotInert(ownTags.Replace(out), format == "markdown"); why != "" {
				t.Errorf("merge --format %s of %q: %s", format, s, why)
			}
		}
	}
	goods := hostileSummaries(t, filepath.Join(dir, "good"), "a")
	for _, c := range []struct {
		field string
		has   func(r *result.Result) bool
		set   func(r *result.Result, w string)
	}{
		{"analysis.input.format", nil, func(r *result.Result, w string) { r.Input.Format = w }},
		{"analysis.devices[0].kind", nil, func(r *result.Result, w string) { r.Devices[0].Kind = w }},
		{"analysis.devices[0].peak.phase", nil, func(r *result.Result, w string) { r.Devices[0].Peak.Phase = result.Phase(w) }},
		{"analysis.devices[0].oom.phase", func(r *result.Result) bool { return r.Devices[0].OOM != nil },
			func(r *result.Result, w string) { r.Devices[0].OOM.Phase = result.Phase(w) }},
		{"analysis.devices[0].phase_peaks[0].phase", func(r *result.Result) bool { return len(r.Devices[0].PhasePeaks) > 0 },
			func(r *result.Result, w string) { r.Devices[0].PhasePeaks[0].Phase = result.Phase(w) }},
		{"analysis.leaks[0].confidence", func(r *result.Result) bool { return len(r.Leaks) > 0 },
			func(r *result.Result, w string) { r.Leaks[0].Confidence = result.Confidence(w) }},
	} {
		var good string
		var base []byte
		for _, g := range goods {
			b, _ := os.ReadFile(g)
			var r result.Result
			if json.Unmarshal(b, &r) == nil && len(r.Devices) > 0 && (c.has == nil || c.has(&r)) {
				good, base = g, b
				break
			}
		}
		if good == "" {
			t.Fatalf("%s: no analysis of the job has one", c.field)
		}
		for _, s := range hostileStrings {
			var r result.Result
			if err := json.Unmarshal(base, &r); err != nil {
				t.Fatal(err)
			}
			c.set(&r, "WORD")
			js, _ := json.Marshal(&r)
			p := writeTemp(t, dir, "bad.json", []byte(strings.Replace(string(js), `"WORD"`, rawJSONString(s), 1)))
			for _, args := range [][]string{{"merge", p}, {"diff", p, good}, {"check", good, "--baseline", p}} {
				code, _, stderr := runCLI(nil, args...)
				want := c.field
				if args[0] == "merge" && !utf8.ValidString(s) {
					want = "invalid UTF-8 at byte offset" // refused before the field is known
				}
				if code != exitInput || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
					t.Errorf("%s %s = %q: exit %d, stderr %q; want 2 and one line naming %s", args[0], c.field, s, code, stderr, want)
				}
				if why := st.NotInert(stderr, false); why != "" {
					t.Errorf("%s %s = %q: the error is not inert: %s", args[0], c.field, s, why)
				}
			}
		}
	}
}
