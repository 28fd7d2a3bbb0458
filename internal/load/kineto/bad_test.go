package kineto_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/load/loadtest"
	"github.com/torchmem/torchmem/snapshot"
)

func TestTraceBadInput(t *testing.T) {
	deep := `{"traceEvents": [{"ph": "X", "args": {"a": ` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}]}`
	tests := []struct {
		name   string
		in     string
		opts   snapshot.Options
		want   string
		offset int64 // −2: do not check
	}{
		{"empty", "", snapshot.Options{}, "empty", 0},
		{"spaces", "   \n", snapshot.Options{}, "not a PyTorch memory snapshot", 0},
		{"not JSON", "{not json}", snapshot.Options{}, "invalid chrome trace JSON", -2},
		{"open brace", "{", snapshot.Options{}, "unexpected end of JSON input", 1},
		{"empty object", "{}", snapshot.Options{}, "no traceEvents", 0},
		{"traceEvents number", `{"traceEvents": 5}`, snapshot.Options{}, "traceEvents is a number, not an array", 16},
		{"traceEvents object", `{"schemaVersion": 1, "traceEvents": {"a": 1}}`, snapshot.Options{}, "traceEvents is an object", -2},
		{"event not an object", `{"traceEvents": [{"ph": "X"}, 2]}`, snapshot.Options{}, "element 1 of traceEvents is a number", 30},
		{"snapshot as JSON", `{"segments": [], "device_traces": [[]]}`, snapshot.Options{}, "memory snapshot as JSON", 0},
		{"other object", `{"username": "x", "token": "SECRET"}`, snapshot.Options{}, `no traceEvents (2 keys: "username", "token")`, 0},
		{"array of numbers", `[1, 2, 3]`, snapshot.Options{}, "a JSON array of a number", 1},
		{"string", `["a"]`, snapshot.Options{}, "a JSON array of a string", -2},
		{"short timeline row", `[[1, 2]]`, snapshot.Options{}, "row 0 has 2 fields", 1},
		{"timeline row of strings", `[[-1, 1, 5, 7], ["a", 1, 2, 3]]`, snapshot.Options{}, "row 1: field 0 is not an integer", 17},
		{"trailing data", `{"traceEvents": []} {}`, snapshot.Options{}, "data after the top-level value", 20},
		{"trailing comma", `{"traceEvents": [],}`, snapshot.Options{}, "invalid chrome trace JSON", -2},
		{"truncated string", `{"traceEvents": [{"name": "aten::`, snapshot.Options{}, "unexpected end of JSON input", -2},
		{"too deep", deep, snapshot.Options{}, "nested deeper than 10000", 10039},
		{"too deep for MaxDepth", `{"traceEvents": [{"args": {"a": [[1]]}}]}`, snapshot.Options{MaxDepth: 4}, "nested deeper than 4", 32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := load.Read(strings.NewReader(tc.in), "bad.json", int64(len(tc.in)), tc.opts)
			if err == nil {
				t.Fatalf("no error; snapshot %+v", s.Source)
			}
			e := loadtest.WantInputError(t, err, "bad.json", tc.want)
			if tc.offset != -2 && e.Offset != tc.offset {
				t.Errorf("offset %d, want %d (%v)", e.Offset, tc.offset, err)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error echoes a value: %v", err)
			}
		})
	}
}

// TestTraceTruncated cuts the decompressed DDP trace at every 1% (every 10%
// with -short): each cut must be a one-line *Error at an offset inside the
// cut, never a panic or a partial success.
func TestTraceTruncated(t *testing.T) {
	raw := gunzipFile(t, traceFile(t, "hta_ddp_training_gpu_memory.json.gz"))
	step := 1
	if testing.Short() {
		step = 10
	}
	for pct := step; pct < 100; pct += step {
		cut := raw[:len(raw)*pct/100]
		_, err := load.Read(bytes.NewReader(cut), "cut.json", int64(len(cut)), snapshot.Options{})
		e := loadtest.WantInputError(t, err, "cut.json", "invalid chrome trace JSON")
		if e.Offset < 0 || e.Offset > int64(len(cut)) {
			t.Errorf("%d%%: offset %d outside the %d bytes", pct, e.Offset, len(cut))
		}
	}
}

// TestTraceTruncatedGzip cuts the compressed file itself.
func TestTraceTruncatedGzip(t *testing.T) {
	gz, err := os.ReadFile(traceFile(t, "tracelens_rocm_norm_layers.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pct := range []int{1, 25, 50, 75, 99} {
		cut := gz[:len(gz)*pct/100]
		_, err := load.Read(bytes.NewReader(cut), "cut.json.gz", int64(len(cut)), snapshot.Options{})
		loadtest.WantInputError(t, err, "cut.json.gz", "")
	}
	// A gzip stream that decompresses to a valid trace followed by garbage bytes.
	_, err = load.Read(bytes.NewReader(append(append([]byte{}, gz...), "garbage"...)), "tail.json.gz", -1, snapshot.Options{})
	loadtest.WantInputError(t, err, "tail.json.gz", "")
}

func TestTraceMaxInputBytes(t *testing.T) {
	raw := gunzipFile(t, traceFile(t, "tracelens_rocm_norm_layers.json.gz"))
	_, err := load.Read(bytes.NewReader(raw), "big.json", int64(len(raw)), snapshot.Options{MaxInputBytes: 1 << 20})
	loadtest.WantInputError(t, err, "big.json", "past the limit")
}

func gunzipFile(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestNoEventsErrorEchoesLittle: a JSON object without traceEvents whose
// keys look like secrets (tokens used as names, up to the 1,000 the reader
// keeps and past them) gets one short line that says how many keys there
// are and names at most three, each cut to eight bytes: no key whole.
// (The error named five keys of 40 bytes: a GitHub token whole.)
func TestNoEventsErrorEchoesLittle(t *testing.T) {
	token := func(i int) string { return fmt.Sprintf("ghp_%036d", i) } // a GitHub token's shape, 40 bytes
	for _, n := range []int{1, 4, 100, 1500} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var b strings.Builder
			b.WriteString("{")
			for i := range n {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%q: %q", token(i), "value-"+token(i))
			}
			b.WriteString("}")
			_, err := load.Read(strings.NewReader(b.String()), "keys.json", int64(b.Len()), snapshot.Options{})
			e := loadtest.WantInputError(t, err, "keys.json", fmt.Sprintf("(%d key", n))
			msg := e.Error()
			if len(msg) > 200 {
				t.Errorf("error of %d bytes: %q", len(msg), msg)
			}
			if named := strings.Count(msg, `"ghp_`); named != min(n, 3) {
				t.Errorf("%d keys named, want %d: %q", named, min(n, 3), msg)
			}
			for i := range n {
				if strings.Contains(msg, token(i)[:9]) {
					t.Fatalf("more than 8 bytes of key %d echoed: %q", i, msg)
				}
			}
			if strings.Contains(msg, "value") {
				t.Errorf("a value echoed: %q", msg)
			}
		})
	}
}
