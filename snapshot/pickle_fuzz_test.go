package snapshot_test

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

// FuzzReadPickle: any input ends in a model or a one-line *Error, never a
// panic (the reader's recover turns a panic into "internal error", which
// fails here) and never unbounded work.
func FuzzReadPickle(f *testing.F) {
	f.Add(st.Marshal(fixtureSim().Snapshot(), 4))
	f.Add(st.Marshal(fixtureSim().Snapshot(), 2))
	f.Add([]byte("\x80\x04}\x94(\x8c\x08segments\x94]\x94\x8c\rdevice_traces\x94]\x94]\x94au."))
	for _, name := range []string{"edge_no_segments_sunnysood.pickle", "edge_2dev_expandable_no_trace_albi2.pickle", "genD_torch2.4_lfielike_state_only.pickle"} {
		if data, err := os.ReadFile("../../shared/snapshots/" + name); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || (data[0] != 0x80 && data[0] != '}' && data[0] != ']' && data[0] != '(') {
			data = append([]byte{0x80, 0x04}, data...)
		}
		_, err := load.Read(bytes.NewReader(data), "fuzz.pickle", int64(len(data)), snapshot.Options{MaxStringBytes: 1 << 20})
		if err == nil {
			return
		}
		var e *snapshot.Error
		if !errors.As(err, &e) {
			t.Fatalf("error %T is not an *Error: %v", err, err)
		}
		if msg := err.Error(); strings.Contains(msg, "internal error") || strings.ContainsAny(msg, "\n\r") {
			t.Fatalf("bad error: %q", msg)
		}
	})
}
