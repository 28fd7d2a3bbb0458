package snapshot

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// panicAfterReader fails the way a bug below the decoder would.
type panicAfterReader struct{ after int }

func (p *panicAfterReader) Read(b []byte) (int, error) {
	if p.after <= 0 {
		panic("boom")
	}
	n := min(len(b), p.after)
	p.after -= n
	return n, nil
}

func TestReadAheadDeliversTheReaderExactly(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), aheadChunkBytes/16*3+7) // 3 chunks and a bit
	bad := errors.New("disk on fire")
	tests := []struct {
		name    string
		src     io.Reader
		want    []byte
		wantErr error
	}{
		{"empty", strings.NewReader(""), nil, io.EOF},
		{"small", strings.NewReader("hello"), []byte("hello"), io.EOF},
		{"several chunks", bytes.NewReader(big), big, io.EOF},
		{"one byte at a time", iotest.OneByteReader(bytes.NewReader(big[:1000])), big[:1000], io.EOF},
		{"data then error", io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(bad)), []byte("abc"), bad},
		{"error with the data", iotest.DataErrReader(strings.NewReader("xyz")), []byte("xyz"), io.EOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ra := newReadAhead(tc.src, nil)
			defer ra.stop()
			var got []byte
			buf := make([]byte, 4096+3) // not a divisor of the chunk size
			var err error
			for {
				var n int
				n, err = ra.Read(buf)
				got = append(got, buf[:n]...)
				if err != nil {
					break
				}
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("read %d bytes, want %d (equal: %v)", len(got), len(tc.want), bytes.Equal(got, tc.want))
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if ra.n != int64(len(tc.want)) {
				t.Errorf("counted %d bytes delivered, want %d", ra.n, len(tc.want))
			}
			if _, again := ra.Read(buf); !errors.Is(again, tc.wantErr) {
				t.Errorf("error is not sticky: %v", again)
			}
		})
	}
}

func TestReadAheadPanicBecomesAnError(t *testing.T) {
	ra := newReadAhead(&panicAfterReader{after: 10}, nil)
	defer ra.stop()
	got, err := io.ReadAll(ra)
	if len(got) != 10 || err == nil || err.Error() != "reader failure: boom" {
		t.Fatalf("got %d bytes, error %v; want the 10 bytes read before the panic, then the panic as an error", len(got), err)
	}
}

func TestReadAheadStopsEarlyAndCarriesTags(t *testing.T) {
	calls := int64(0)
	src := bytes.NewReader(make([]byte, aheadChunkBytes*(aheadChunks+5)))
	ra := newReadAhead(src, func() int64 { calls++; return calls })
	buf := make([]byte, 10)
	if _, err := ra.Read(buf); err != nil {
		t.Fatal(err)
	}
	if ra.cur.tag != 1 {
		t.Errorf("first chunk tagged %d, want 1", ra.cur.tag)
	}
	ra.stop() // the producer is blocked on full buffers: stop must not hang
	if calls > aheadChunks+1 {
		t.Errorf("producer read %d chunks ahead, want at most %d", calls, aheadChunks+1)
	}
}

// TestReadAheadPanicInsideDecoders: a reader that panics in the middle of a
// file fails the decoders with a one-line error, whichever goroutine ran it.
func TestReadAheadPanicInsideDecoders(t *testing.T) {
	trace := `{"traceEvents": [` + strings.Repeat(`{"ph": "X", "name": "aten::add", "ts": 1, "dur": 2, "pid": 1, "tid": 1},`, 5000)
	pickleHead := "\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00]\x94(" + strings.Repeat("K\x01", 200000)
	tests := []struct {
		name string
		read func(*bufio.Reader) (*Snapshot, error)
		head string
	}{
		{"chrome trace", func(in *bufio.Reader) (*Snapshot, error) {
			return readChromeTrace(in, Source{Path: "p.json"}, Options{}, 0)
		}, trace},
		{"pickle", func(in *bufio.Reader) (*Snapshot, error) {
			return readPickle(in, Source{Path: "p.pickle"}, Options{}, -1)
		}, pickleHead},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := io.MultiReader(strings.NewReader(tc.head), &panicAfterReader{})
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
