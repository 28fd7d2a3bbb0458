package kineto_test

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load/kineto"
	"github.com/torchmem/torchmem/internal/load/loadtest"
	"github.com/torchmem/torchmem/snapshot"
)

type panicReader struct{}

func (panicReader) Read([]byte) (int, error) { panic("boom\nsecond line") }

// TestTraceRecoversPanic: a panic below the reader becomes a one-line *Error.
func TestTraceRecoversPanic(t *testing.T) {
	in := bufio.NewReaderSize(panicReader{}, 16)
	_, err := kineto.Read(in, snapshot.Source{Path: "p.json"}, snapshot.Options{}, 0)
	loadtest.WantInputError(t, err, "p.json", "reader failure: boom second line")
}

// FuzzTraceRead: any input gives a snapshot that satisfies the invariants or
// a one-line *Error; never a panic (the recover guard is not relied on: a
// recovered panic fails the fuzz target).
func FuzzTraceRead(f *testing.F) {
	for _, s := range []string{
		`{"traceEvents": []}`,
		`[[-1, 1, 512, 7], [10, 2, 512, 4], [20, 4, -512, 4]]`,
		`{"baseTimeNanoseconds": 5, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": "2", "ts": "1.5", "dur": 3, "args": {"Call stack": "a.py(1): f;b.py(x): g"}},` +
			`{"ph": "i", "name": "[memory]", "pid": 1, "tid": 2, "ts": 2, "args": {"Device Type": 1, "Device Id": 0, "Addr": 16, "Bytes": 512, "Total Allocated": 512, "Total Reserved": 2048}},` +
			`{"ph": "i", "name": "[OutOfMemory]", "pid": 1, "tid": 2, "ts": 3, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 512}},` +
			`{"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: X", "pid": 1, "tid": 3, "ts": 1, "dur": 1},` +
			`{"ph": "X", "cat": "python_function", "name": "nn.Module: A_0", "pid": 1, "tid": 2, "ts": 0, "dur": 9},` +
			`{"ph": "X", "cat": "cpu_op", "name": "torch::autograd::AccumulateGrad", "pid": 1, "tid": 3, "ts": 1, "dur": 1, "args": {"Input Dims": [[2, 3]], "Input type": ["float"]}},` +
			`{"ph": "M", "name": "thread_name", "pid": 1, "tid": 3, "args": {"name": "pt_autograd_0"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || (data[0] != '{' && data[0] != '[') {
			return
		}
		s, err := kineto.Read(bufio.NewReader(bytes.NewReader(data)), snapshot.Source{Path: "f.json"}, snapshot.Options{MaxDepth: 100}, 0)
		if err != nil {
			var e *snapshot.Error
			if !errors.As(err, &e) || strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("error %q (%T)", err, err)
			}
			if strings.Contains(err.Error(), "reader failure") {
				t.Fatalf("recovered panic: %v", err)
			}
			return
		}
		checkTraceInvariants(t, s)
	})
}
