package snapshot_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/load/jsonlex"
	"github.com/torchmem/torchmem/internal/load/loadtest"
	"github.com/torchmem/torchmem/snapshot"
)

const memEvent = `{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5, "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096, "Bytes": 512, "Total Allocated": 512}}`

// TestJSONWhitespaceNotKept: 64 MiB of spaces (or newlines and tabs) between
// tokens or before the first one, plain or gzipped, are read allocating at
// most 16 MiB (the decoder kept them: 2.6× their size), and the event after
// them is read.
func TestJSONWhitespaceNotKept(t *testing.T) {
	const n = 64 << 20
	cases := []struct {
		name string
		r    func() io.Reader
	}{
		{"inside the array", func() io.Reader {
			return io.MultiReader(strings.NewReader(`{"traceEvents": [`), &spaceReader{n: n, c: ' '}, strings.NewReader(memEvent+`]}`))
		}},
		{"between members", func() io.Reader {
			return io.MultiReader(strings.NewReader(`{"traceEvents": [{"ph": "i",`), &spaceReader{n: n, c: '\n'},
				strings.NewReader(strings.TrimPrefix(memEvent, `{"ph": "i",`)+`]}`))
		}},
		{"leading", func() io.Reader {
			return io.MultiReader(&spaceReader{n: n, c: '\t'}, strings.NewReader(`{"traceEvents": [`+memEvent+`]}`))
		}},
		{"gzip", func() io.Reader { // the file: a 204 KB gzip of 200 MB of spaces took 600 MB
			var b bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
			io.Copy(zw, io.MultiReader(strings.NewReader(`{"traceEvents": [`), &spaceReader{n: n, c: ' '}, strings.NewReader(memEvent+`]}`)))
			zw.Close()
			return &b
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s *snapshot.Snapshot
			var err error
			m := allocated(func() { s, err = load.Read(c.r(), "spaces.json", -1, snapshot.Options{}) })
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Devices) != 1 || len(s.Devices[0].Events) != 1 {
				t.Fatalf("the event after the spaces was not read")
			}
			if s.Source.Bytes < n {
				t.Errorf("input bytes %d, want more than %d", s.Source.Bytes, n)
			}
			if m > 16<<20 {
				t.Errorf("allocated %d bytes", m)
			}
		})
	}
}

// TestJSONOffsetsAfterCuts: offsets of errors after whitespace the reader
// cut are those of the input, whatever the chunking.
func TestJSONOffsetsAfterCuts(t *testing.T) {
	pad := strings.Repeat(" ", 300<<10)
	in := `{"traceEvents": [` + pad + memEvent + "," + pad + `{"ph": "i",` + pad + `"name": x}]}`
	want := int64(strings.Index(in, "x}"))
	for _, r := range []io.Reader{strings.NewReader(in), iotest.HalfReader(strings.NewReader(in)), iotest.OneByteReader(strings.NewReader(in))} {
		_, err := load.Read(r, "cut.json", -1, snapshot.Options{})
		e := loadtest.WantInputError(t, err, "cut.json", "invalid character 'x'")
		if e.Offset != want {
			t.Errorf("offset %d, want %d", e.Offset, want)
		}
	}
}

const deepPrefix = `{"traceEvents": [{"ph": "X", "cat": "cpu_op", "args": {"Input Dims": [`

// TestJSONLongValues: a 20 MiB string, a 1 MiB number and a 5 MiB array in
// an event's args stop with one line — at the string's start, where the
// number passes the limit, at the start of the args holding the array —
// holding at most about what the limit allows.
func TestJSONLongValues(t *testing.T) {
	cases := []struct {
		name, want string
		r          func() io.Reader
		offset     int64
		maxAlloc   uint64
	}{
		{"string", "a JSON string longer than 16777216 bytes", func() io.Reader {
			return io.MultiReader(strings.NewReader(`{"traceEvents": [{"name": "`), &spaceReader{n: 20 << 20, c: 'a'}, strings.NewReader(`"}]}`))
		}, 26, 96 << 20},
		{"number", "a JSON number or literal longer than 65536 bytes", func() io.Reader {
			return io.MultiReader(strings.NewReader(`{"traceEvents": [{"ts": 1`), &spaceReader{n: 1 << 20, c: '0'}, strings.NewReader(`}]}`))
		}, 22 + jsonlex.LongGap + jsonlex.MaxTokenBytes, 16 << 20},
		{"deep array", "a JSON value nested 4 levels deep longer than 4194304 bytes", func() io.Reader {
			return io.MultiReader(strings.NewReader(deepPrefix), &repeatReader{n: 5 << 20, s: `"a", `}, strings.NewReader(`"a"]}}]}`))
		}, int64(strings.Index(deepPrefix, `{"Input`)), 64 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			m := allocated(func() { _, err = load.Read(c.r(), "long.json", -1, snapshot.Options{}) })
			e := loadtest.WantInputError(t, err, "long.json", c.want)
			if e.Offset != c.offset {
				t.Errorf("offset %d, want %d", e.Offset, c.offset)
			}
			if m > c.maxAlloc {
				t.Errorf("allocated %d bytes", m)
			}
		})
	}
}

// repeatReader yields s over and over, n bytes in all.
type repeatReader struct {
	n   int64
	s   string
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	k := 0
	for k < len(p) && int64(k) < r.n {
		p[k] = r.s[r.off]
		r.off = (r.off + 1) % len(r.s)
		k++
	}
	r.n -= int64(k)
	return k, nil
}

// TestLeadingWhitespaceAccepted: JSON and HTML after more than 64 bytes of
// whitespace (and a byte-order mark) are recognised, offsets counted from
// the file's start.
func TestLeadingWhitespaceAccepted(t *testing.T) {
	pad := "\ufeff" + strings.Repeat(" \r\n\t", 100)
	s, err := load.Read(strings.NewReader(pad+`{"traceEvents": [`+memEvent+`]}`), "lead.json", -1, snapshot.Options{})
	if err != nil || len(s.Devices) != 1 {
		t.Fatalf("%v", err)
	}
	_, err = load.Read(strings.NewReader(pad+`{"traceEvents": [x]}`), "lead.json", -1, snapshot.Options{})
	e := loadtest.WantInputError(t, err, "lead.json", "invalid character 'x'")
	if want := int64(len(pad) + 17); e.Offset != want {
		t.Errorf("offset %d, want %d", e.Offset, want)
	}
	_, err = load.Read(bytes.NewReader([]byte(pad+"   ")), "blank.json", -1, snapshot.Options{})
	loadtest.WantInputError(t, err, "blank.json", "not a PyTorch memory snapshot, trace_plot HTML or chrome trace")
}
