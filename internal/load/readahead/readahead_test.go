package readahead

import (
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
			ra := NewReader(tc.src, nil)
			defer ra.Stop()
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
			if ra.Delivered() != int64(len(tc.want)) {
				t.Errorf("counted %d bytes delivered, want %d", ra.Delivered(), len(tc.want))
			}
			if _, again := ra.Read(buf); !errors.Is(again, tc.wantErr) {
				t.Errorf("error is not sticky: %v", again)
			}
		})
	}
}

func TestReadAheadPanicBecomesAnError(t *testing.T) {
	ra := NewReader(&panicAfterReader{after: 10}, nil)
	defer ra.Stop()
	got, err := io.ReadAll(ra)
	if len(got) != 10 || err == nil || err.Error() != "reader failure: boom" {
		t.Fatalf("got %d bytes, error %v; want the 10 bytes read before the panic, then the panic as an error", len(got), err)
	}
}

func TestReadAheadStopsEarlyAndCarriesTags(t *testing.T) {
	calls := int64(0)
	src := bytes.NewReader(make([]byte, aheadChunkBytes*(aheadChunks+5)))
	ra := NewReader(src, func() int64 { calls++; return calls })
	buf := make([]byte, 10)
	if _, err := ra.Read(buf); err != nil {
		t.Fatal(err)
	}
	if ra.Tag() != 1 {
		t.Errorf("first chunk tagged %d, want 1", ra.Tag())
	}
	ra.Stop() // the producer is blocked on full buffers: stop must not hang
	if calls > aheadChunks+1 {
		t.Errorf("producer read %d chunks ahead, want at most %d", calls, aheadChunks+1)
	}
}
