package kineto_test

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/internal/load/kineto"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// sameAsReference reads data with the fast path and with the decoder alone
// and fails unless both give the same snapshot or the same error, to the
// byte offset. It reports whether the read succeeded.
func sameAsReference(t *testing.T, what string, data []byte, opts snapshot.Options) bool {
	t.Helper()
	src := snapshot.Source{Path: "t.json", FileBytes: int64(len(data))}
	want, wantErr := kineto.ReadReference(bufio.NewReader(bytes.NewReader(data)), src, opts)
	got, err := kineto.Read(bufio.NewReader(bytes.NewReader(data)), src, opts, 0)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("%s: error\n%v\nwant\n%v", what, err, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: snapshots differ (-reference +fast):\n%s", what, cmp.Diff(want, got))
	}
	return err == nil
}

// generatedTrace is a Kineto trace of about n bytes from the generator of
// the benchmarks: longer than the fast path's buffer, so its events cross
// the buffer's end.
func generatedTrace(t *testing.T, n int64, seed int64) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := st.WriteBigTrace(&b, n, seed); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestFastPathSameAsDecoder: every real trace and generated ones read the
// same with the fast path as with the decoder alone.
func TestFastPathSameAsDecoder(t *testing.T) {
	files := []string{
		"hta_ddp_training_gpu_memory.json.gz", "hta_large_integer.json.gz", "hta_rocm_minitoy_train.json.gz",
		"kineto_resnet50_legacy_v100.json.gz", "tracelens_resnet18_train_cpu_memory_stacks.json.gz",
		"tracelens_rocm_norm_layers.json.gz", "hta_memory_timeline_categories.raw.json.gz",
		"recorded/hf_llama_mixed_ckpt_train.trace.json.gz", "recorded/record_trace/trace_rank0_824.json.gz",
	}
	for _, f := range files {
		data := gunzipFile(t, traceFile(t, f))
		if !sameAsReference(t, f, data, snapshot.Options{}) {
			t.Errorf("%s: not read", f)
		}
	}
	for seed := int64(1); seed <= 2; seed++ {
		data := generatedTrace(t, 3<<20, seed)
		if !sameAsReference(t, fmt.Sprint("generated ", seed), data, snapshot.Options{}) {
			t.Errorf("generated trace %d: not read", seed)
		}
	}
}

// TestFastPathSameOnOddInput: what the fast path hands to the decoder
// (syntax errors, escapes, control bytes, NaN, nulls, limits, truncation)
// reads the same as with the decoder alone, errors to the byte offset.
func TestFastPathSameOnOddInput(t *testing.T) {
	ev := func(name, args string) string {
		return `{"ph": "X", "cat": "cpu_op", "name": "` + name + `", "pid": 1, "tid": 2, "ts": 10, "dur": 5, "args": {` + args + `}}`
	}
	memEv := `{"ph": "i", "name": "[memory]", "pid": 1, "tid": 2, "ts": 12, "args": {"Device Type": 1, "Device Id": 0, "Addr": 16, "Bytes": 512, "Total Allocated": 512, "Total Reserved": 2048}}`
	trace := func(events ...string) string {
		return `{"schemaVersion": 1, "traceEvents": [` + strings.Join(events, ",\n") + `], "baseTimeNanoseconds": 7}`
	}
	cases := map[string]string{
		"control bytes in a name": trace(ev("a\tb\nc\x01", `"Input Dims": [[2, 3]]`), memEv),
		"escapes":                 trace(ev(`a\"b\\c\/d\b\f\n\r\t\u00e9\ud800`, `"Call stack": "x.py(1): f\u003b"`), memEv),
		"bad escape":              trace(ev(`a\qb`, ""), memEv),
		"escaped control byte":    trace(ev("a\\\tb", ""), memEv),
		"short unicode escape":    trace(ev(`a\u12`, ""), memEv),
		"NaN":                     trace(memEv, strings.Replace(memEv, "512,", "NaN,", 1)),
		"Infinity":                trace(memEv, strings.Replace(memEv, `"ts": 12`, `"ts": Infinity`, 1)),
		"numbers":                 trace(strings.Replace(memEv, "512,", "-0.5e+3,", 1), strings.Replace(memEv, "512,", `"0x200",`, 1), strings.Replace(memEv, "512,", "512.0,", 1)),
		"integers at their bounds": trace(
			strings.Replace(memEv, `"ts": 12`, `"ts": 9223372036854775`, 1), strings.Replace(memEv, `"ts": 12`, `"ts": 9223372036854776`, 1),
			strings.Replace(memEv, `"ts": 12`, `"ts": -9223372036854775`, 1), strings.Replace(memEv, `"ts": 12`, `"ts": -9223372036854776`, 1),
			strings.Replace(ev("t", ""), `"dur": 5`, `"dur": -0`, 1), strings.Replace(ev("u", ""), `"dur": 5`, `"dur": 9223372036854776`, 1),
			strings.Replace(memEv, `"Addr": 16`, `"Addr": -16`, 1), strings.Replace(memEv, `"Addr": 16`, `"Addr": -0`, 1),
			strings.Replace(memEv, `"Addr": 16`, `"Addr": 999999999999999999`, 1), strings.Replace(memEv, `"Addr": 16`, `"Addr": 18446744073709551615`, 1),
			strings.Replace(memEv, "512,", "999999999999999999,", 1), strings.Replace(memEv, "512,", "-9223372036854775808,", 1),
			strings.Replace(memEv, "512,", "9223372036854775808,", 1), strings.Replace(memEv, `"Device Id": 0`, `"Device Id": -1`, 1),
			strings.Replace(memEv, `"Total Reserved": 2048`, `"Total Reserved": "2048"`, 1)),
		"leading zero":             trace(strings.Replace(memEv, "512,", "0512,", 1)),
		"number then letter":       trace(strings.Replace(memEv, "512,", "512x,", 1)),
		"bare dot":                 trace(strings.Replace(memEv, "512,", "512.,", 1)),
		"literals":                 trace(ev("a", `"x": true, "y": false, "z": null, "Bytes": null`), memEv),
		"literal typo":             trace(ev("a", `"x": nul`)),
		"null elements":            `{"traceEvents": [null, ` + memEv + `, null]}`,
		"number element":           trace(memEv, "5", memEv),
		"empty":                    `{"traceEvents": []}`,
		"empty objects":            trace("{}", `{"args": {}}`, memEv),
		"trailing comma":           trace(memEv, memEv) + "x",
		"comma before end":         `{"traceEvents": [` + memEv + `,]}`,
		"two commas":               `{"traceEvents": [` + memEv + `,,` + memEv + `]}`,
		"missing comma":            `{"traceEvents": [` + memEv + memEv + `]}`,
		"missing colon":            trace(`{"ph" "X"}`),
		"key not a string":         trace(`{ph: "X"}`),
		"duplicate keys":           trace(`{"ph": "X", "ph": "i", "name": "[memory]", "name": {"a": 1}, "pid": 1, "tid": 1, "ts": 3, "args": {"Device Type": 1, "Bytes": 8}, "args": {"Bytes": 16, "Device Type": 1}}`),
		"args not an object":       trace(`{"ph": "i", "name": "[memory]", "args": [1, 2]}`, memEv),
		"object values ignored":    trace(`{"ph": {"a": "X"}, "cat": ["cpu_op"], "name": "n", "pid": 1, "tid": 1, "ts": 1, "dur": 1}`),
		"deep args":                trace(ev("a", `"Input Dims": `+strings.Repeat("[", 40)+strings.Repeat("]", 40)), memEv),
		"top-level array":          `[` + memEv + `, ` + ev("b", "") + `]`,
		"top-level array, garbage": `[` + memEv + `, ` + ev("b", "") + `] x`,
		"events twice":             `{"traceEvents": [` + memEv + `], "traceEvents": [` + memEv + `]}`,
		"long whitespace":          trace(memEv, strings.Repeat(" ", 200<<10)+memEv, strings.Replace(memEv, `"ts": 12`, `"ts":`+strings.Repeat("\n", 70<<10)+"12", 1)),
		"long number":              trace(strings.Replace(memEv, "512,", strings.Repeat("1", 70<<10)+",", 1)),
		"event past the buffer":    trace(memEv, ev(strings.Repeat("n", 5<<20), ""), memEv),
		"invalid UTF-8":            trace(ev("a\xff\xfeb", `"Call stack": "\xc3"`), memEv),
	}
	for name, js := range cases {
		t.Run(name, func(t *testing.T) {
			for _, opts := range []snapshot.Options{{}, {MaxDepth: 4}, {MaxDepth: 5}, {MaxStringBytes: 16}} {
				sameAsReference(t, fmt.Sprintf("%+v", opts), []byte(js), opts)
				// Cut anywhere: the same truncation error.
				for _, cut := range []int{1, len(js) / 3, len(js) / 2, len(js) - 2} {
					sameAsReference(t, fmt.Sprintf("cut at %d %+v", cut, opts), []byte(js[:cut]), opts)
				}
			}
		})
	}
}

// TestFastPathSameOnMutations: a generated trace with one byte or token
// changed, inserted or removed at a random place (2,000 places, the same
// every run) reads the same with the fast path as with the decoder alone.
func TestFastPathSameOnMutations(t *testing.T) {
	base := generatedTrace(t, 300<<10, 7)
	inserts := []string{"x", ",", "]", "}", "{", "[", `"`, `\`, "\t", "\x01", " ", "NaN", "1e5", "-", "0", "null", `\u12`, `"a":1,`, "\xff"}
	rng := rand.New(rand.NewSource(1))
	fails := 0
	n := 2000
	if testing.Short() {
		n = 200
	}
	for k := range n {
		p := rng.Intn(len(base))
		var data []byte
		switch rng.Intn(4) {
		case 0: // insert
			s := inserts[rng.Intn(len(inserts))]
			data = append(append(append([]byte{}, base[:p]...), s...), base[p:]...)
		case 1: // delete
			data = append(append([]byte{}, base[:p]...), base[p+1:]...)
		case 2: // replace
			data = append([]byte{}, base...)
			data[p] = inserts[rng.Intn(len(inserts))][0]
		default: // truncate
			data = base[:p]
		}
		if !sameAsReference(t, fmt.Sprintf("mutation %d at %d", k, p), data, snapshot.Options{}) {
			fails++
		}
	}
	// Most changes break the JSON, some do not: both kinds were compared.
	if fails == 0 || fails == n {
		t.Errorf("%d of %d mutations failed to read; want some of each", fails, n)
	}
}

// FuzzFastPathSameAsDecoder: any input reads the same with the fast path
// as with the decoder alone (snapshot or error, to the byte offset).
func FuzzFastPathSameAsDecoder(f *testing.F) {
	for _, s := range []string{
		`{"traceEvents": []}`,
		`[{"ph": "i", "name": "[memory]", "pid": 1, "tid": 2, "ts": 2, "args": {"Device Type": 1, "Bytes": 512}}, null]`,
		`{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a\tb\u00e9", "pid": 1, "tid": "2", "ts": "1.5", "dur": 3e0, "args": {"Input Dims": [[2, 3]], "Call stack": "a.py(1): f"}},` +
			`{"ph": "i", "name": "[memory]", "pid": 1, "tid": 2, "ts": 2, "args": {"Device Type": 1, "Device Id": 0, "Addr": 16, "Bytes": -512.0, "Total Allocated": true}}], "x": {}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsReference(t, "fuzz", data, snapshot.Options{MaxDepth: 100})
	})
}
