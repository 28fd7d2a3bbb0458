package snapshot_test

import (
	"bufio"
	"io"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load/kineto"
	"github.com/torchmem/torchmem/internal/load/pickle"
	"github.com/torchmem/torchmem/snapshot"
)

// TestReadAheadPanicInsideDecoders: a reader that panics in the middle of a
// file fails the decoders with a one-line error, whichever goroutine ran it.
func TestReadAheadPanicInsideDecoders(t *testing.T) {
	trace := `{"traceEvents": [` + strings.Repeat(`{"ph": "X", "name": "aten::add", "ts": 1, "dur": 2, "pid": 1, "tid": 1},`, 5000)
	pickleHead := "\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00]\x94(" + strings.Repeat("K\x01", 200000)
	tests := []struct {
		name string
		read func(*bufio.Reader) (*snapshot.Snapshot, error)
		head string
	}{
		{"chrome trace", func(in *bufio.Reader) (*snapshot.Snapshot, error) {
			return kineto.Read(in, snapshot.Source{Path: "p.json"}, snapshot.Options{}, 0)
		}, trace},
		{"pickle", func(in *bufio.Reader) (*snapshot.Snapshot, error) {
			return pickle.Read(in, snapshot.Source{Path: "p.pickle"}, snapshot.Options{}, -1)
		}, pickleHead},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := io.MultiReader(strings.NewReader(tc.head), &panickyReader{})
			_, err := tc.read(bufio.NewReaderSize(src, 16))
			if err == nil || !strings.Contains(err.Error(), "reader failure: boom") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q, want a one-line reader failure", err)
			}
			if testing.Verbose() {
				t.Log(err)
			}
		})
	}
}

// panickyReader fails the way a bug below the decoder would: it panics
// once it has given after bytes.
type panickyReader struct{ after int }

func (p *panickyReader) Read(b []byte) (int, error) {
	if p.after <= 0 {
		panic("boom")
	}
	n := min(len(b), p.after)
	p.after -= n
	return n, nil
}
