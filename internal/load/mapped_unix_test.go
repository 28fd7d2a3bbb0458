//go:build unix

package load_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// Unix only: elsewhere files are read, not mapped.

// TestMappedFileTruncatedWhileRead: a file cut short while the decoder
// reads it in place (another process rewriting it) is a one-line error
// naming the file and the first offset that could not be read, never a
// crash: the decoder's memory fault is recovered.
func TestMappedFileTruncatedWhileRead(t *testing.T) {
	var b bytes.Buffer
	if _, err := st.WriteTraining(&b, st.TrainingConfig{TargetBytes: 2 << 20}); err != nil {
		t.Fatal(err)
	}
	path := writeTemp(t, "shrinks.pickle", b.Bytes())
	const keep = 64 << 10 // page-aligned on every platform's page size
	truncated := false
	opts := snapshot.Options{Progress: func(int64) { // on the decoder's goroutine, as it starts
		if !truncated {
			truncated = true
			if err := os.Truncate(path, keep); err != nil {
				t.Fatal(err)
			}
		}
	}}
	s, err := load.Open(path, opts)
	if !truncated {
		t.Fatal("the progress callback never ran: the file was not truncated")
	}
	var e *snapshot.Error
	if s != nil || !errors.As(err, &e) {
		t.Fatalf("got %v, %v; want a snapshot.Error", s, err)
	}
	if e.Path != path || e.Offset < keep || e.Offset >= keep+64 || !strings.Contains(e.Msg, "shorter") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q (path %q, offset %d): want one line naming %s, an offset from %d and the truncation", err, e.Path, e.Offset, path, keep)
	}
}
