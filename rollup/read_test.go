package rollup

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/resulttest"
	"github.com/torchmem/torchmem/result"
)

// readAll reads summaries from data and returns the input paths in order.
func readAll(data []byte, limit int64) ([]*result.Result, error) {
	var out []*result.Result
	err := ReadSummaries(bytes.NewReader(data), "s.json", limit, func(r *result.Result) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

func analysisJSON(t *testing.T, path string) string {
	t.Helper()
	r := &result.Result{Schema: result.SchemaID, Input: result.Input{Path: path}, Devices: []result.DeviceResult{}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func gz(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

func TestReadSummaries(t *testing.T) {
	a, b, c := analysisJSON(t, "a.pickle"), analysisJSON(t, "b.pickle"), analysisJSON(t, "c.pickle")
	noPath := analysisJSON(t, "")
	rollup := func(inputs ...string) string {
		return `{"schema": "torchmem.rollup/v1", "inputs": [` + strings.Join(inputs, ",") + `], "rollup": {"ranks": [], "worst": null}}`
	}
	tests := []struct {
		name  string
		data  []byte
		limit int64
		paths []string
		err   string
	}{
		{"one analysis", []byte(a), 1 << 20, []string{"a.pickle"}, ""},
		{"concatenated", []byte(a + "\n" + b + c), 1 << 20, []string{"a.pickle", "b.pickle", "c.pickle"}, ""},
		{"an array (analyze of several files before roll-ups)", []byte("[" + a + "," + b + "]"), 1 << 20, []string{"a.pickle", "b.pickle"}, ""},
		{"a roll-up: its inputs", []byte(rollup(a, b)), 1 << 20, []string{"a.pickle", "b.pickle"}, ""},
		{"roll-ups and analyses", []byte(rollup(a) + c + rollup(b)), 1 << 20, []string{"a.pickle", "c.pickle", "b.pickle"}, ""},
		{"inputs before the schema", []byte(`{"inputs": [` + a + `], "schema": "torchmem.rollup/v1"}`), 1 << 20, []string{"a.pickle"}, ""},
		{"gzip", gz(a + b), 1 << 20, []string{"a.pickle", "b.pickle"}, ""},
		{"no input path: the file's", []byte(noPath), 1 << 20, []string{"s.json"}, ""},
		{"roll-up larger than the limit, inputs within it", []byte(rollup(a, b, c, a, b, c)), int64(len(a) + 10), []string{"a.pickle", "b.pickle", "c.pickle", "a.pickle", "b.pickle", "c.pickle"}, ""},

		{"empty", nil, 1 << 20, nil, "s.json: no torchmem JSON in the file"},
		{"not JSON", []byte("\x80\x04}q"), 1 << 20, nil, "s.json: bad JSON"},
		{"a number", []byte("42"), 1 << 20, nil, "s.json: not torchmem's JSON"},
		{"no schema", []byte(`{"traceEvents": []}`), 1 << 20, nil, "s.json: a JSON object without a schema"},
		{"another schema", []byte(`{"schema": "torchmem.diff/v1"}`), 1 << 20, nil, `s.json: schema "torchmem.diff/v1"`},
		{"second value bad", []byte(a + ` {"schema": 3}`), 1 << 20, []string{"a.pickle"}, "schema is not a string"},
		{"truncated", []byte(a[:len(a)-10]), 1 << 20, nil, "s.json: truncated JSON at byte offset"},
		{"analysis past the limit", []byte(a), int64(len(a) / 2), nil, "past the limit of"},
		{"analysis with inputs", []byte(`{"inputs": [` + a + `], "schema": "torchmem.analysis/v1"}`), 1 << 20, []string{"a.pickle"}, "an analysis with inputs"},
		{"analysis with a member named inputs", []byte(`{"schema": "torchmem.analysis/v1", "inputs": [1]}`), 1 << 20, []string{"s.json"}, ""}, // fields may be added
		{"too many devices", []byte(`{"schema": "torchmem.analysis/v1", "devices": [` + strings.Repeat(`{"device": 0},`, 256) + `{"device": 1}]}`), 1 << 20, nil, "more than 256 devices at byte offset"},
		{"an empty list", []byte("[]"), 1 << 20, nil, "s.json: no analysis in the file"},
		{"a roll-up without inputs", []byte(rollup()), 1 << 20, nil, "s.json: no analysis in the file"},
		{"empty lists and roll-ups", []byte("[] " + rollup() + " []"), 1 << 20, nil, "s.json: no analysis in the file"},
		{"bad categories", []byte(`{"schema": "torchmem.analysis/v1", "devices": [{"peak": {"categories": {"x": "y"}}}]}`), 1 << 20, nil, "not a valid torchmem analysis"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(tc.data, tc.limit)
			var paths []string
			for _, r := range got {
				paths = append(paths, r.Input.Path)
			}
			if !reflect.DeepEqual(paths, tc.paths) {
				t.Errorf("paths %q; want %q", paths, tc.paths)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v; want %q", err, tc.err)
			}
		})
	}
}

// TestReadSummariesSameRollup: the roll-up of results read back from their
// JSON is the roll-up of the results themselves — table, heat map and all —
// so torchmem merge and analysing the files together agree by construction.
func TestReadSummariesSameRollup(t *testing.T) {
	results, _, _ := resulttest.FaultyJob(t, 'G')
	var stream bytes.Buffer
	for _, r := range results {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		stream.Write(b)
		stream.WriteByte('\n')
	}
	back, err := readAll(stream.Bytes(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want, got := Build(results), Build(back)
	wj, _ := json.Marshal(want)
	gj, _ := json.Marshal(got)
	if !bytes.Equal(wj, gj) {
		t.Errorf("roll-up from JSON differs:\n got %s\nwant %s", gj, wj)
	}
	if !reflect.DeepEqual(want.Heat, got.Heat) {
		t.Errorf("heat map from JSON differs")
	}
}

// TestReadSummariesListing: the inputs a roll-up lists as unreadable are
// handed on, after its readable inputs, so that merging a roll-up again
// lists them again; a roll-up whose list is not one is an error.
func TestReadSummariesListing(t *testing.T) {
	a := analysisJSON(t, "rank0.pickle")
	doc := `{"schema": "torchmem.rollup/v1", "inputs": [` + a + `], "rollup": {"ranks": [], "unreadable": [` +
		`{"path": "run/snapshot_rank5_12.pickle", "rank": 5, "error": "truncated pickle at byte offset 4096"},` +
		`{"path": "x.json", "rank": null, "error": "schema \"torchmem.diff/v1\""}]}}`
	var got []string
	err := ReadSummariesListing(strings.NewReader(doc), "r.json", 1<<20, func(r *result.Result) error {
		got = append(got, "input "+r.Input.Path)
		return nil
	}, func(u Unreadable) {
		rank := "null"
		if u.Rank != nil {
			rank = fmt.Sprint(*u.Rank)
		}
		got = append(got, fmt.Sprintf("unreadable %s rank %s: %s", u.Path, rank, u.Error))
	})
	want := []string{"input rank0.pickle", "unreadable run/snapshot_rank5_12.pickle rank 5: truncated pickle at byte offset 4096",
		`unreadable x.json rank null: schema "torchmem.diff/v1"`}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("%q, %v; want %q", got, err, want)
	}
	bad := strings.Replace(doc, `"unreadable": [`, `"unreadable": 7, "x": [`, 1)
	err = ReadSummariesListing(strings.NewReader(bad), "r.json", 1<<20, func(*result.Result) error { return nil }, func(Unreadable) {})
	if err == nil || !strings.Contains(err.Error(), "r.json: rollup.unreadable: want a list") {
		t.Errorf("error %v", err)
	}
}
