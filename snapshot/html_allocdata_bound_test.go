package snapshot_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/load/loadtest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestAllocDataElementsOnce: a 2022–23 trace_plot page whose actions name
// an element more often than trace_plot did — allocated and freed once, or
// freed once when live before recording — is bad input, found before a
// single event is made: 4M actions of two bytes ("0,0,0,…", 8 KB of gzip)
// became 4M events of 40 bytes (a 58 KB gzip made analyze take 8.3 GB).
// Reading the refused page allocates within SECURITY.md's figure per
// byte of input (128, analysis.allocatedBytesPerInputByte); pages that
// name each element as trace_plot did read.
func TestAllocDataElementsOnce(t *testing.T) {
	page := func(actions string, elements int, initial string) []byte {
		return []byte(`<html><script>let alloc_data = {"actions": [` + actions +
			`], "elements_size": [` + strings.Repeat("512,", elements-1) + `512], "elements_info": [` + strings.Repeat("0,", elements-1) +
			`0], "initially_allocated": [` + initial + `], "suffix_table": [[0,null]], "string_table": ["a.py:1:f"]}</script>`)
	}
	repeat := func(s string, n int) string { return strings.TrimSuffix(strings.Repeat(s, n), ",") }
	cases := []struct {
		name   string
		page   []byte
		events int // −1: refused
	}{
		{"4M mentions of one element", page(repeat("0,", 4<<20), 1, ""), -1},
		{"two elements taking turns", page(repeat("0,1,", 1<<20), 2, ""), -1},
		{"an initial element freed twice", page("0,0", 1, "0"), -1},
		{"an element allocated and freed", page("0,0", 1, ""), 2},
		{"an initial element freed", page("0,1,1", 2, "0"), 3},
		{"each element once or twice", page("0,1,2,1,0", 3, ""), 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			z := st.Gzip(c.page)
			var s *snapshot.Snapshot
			var err error
			heap := st.HeapAllocated(func() {
				s, err = load.Read(bytes.NewReader(z), "page.html.gz", int64(len(z)), snapshot.Options{})
			})
			if c.events >= 0 {
				if err != nil {
					t.Fatal(err)
				}
				if got := len(s.Devices[0].Events); got != c.events {
					t.Errorf("%d events, want %d", got, c.events)
				}
				return
			}
			loadtest.WantInputError(t, err, "page.html.gz", "not a page trace_plot wrote")
			t.Logf("%d bytes of gzip, %d of page: %d bytes allocated", len(z), len(c.page), heap)
			if len(c.page) > 1<<20 && heap > uint64(128*len(c.page)) { // past the reader's fixed buffers
				t.Errorf("%d bytes allocated for %d bytes of page, more than 128 a byte", heap, len(c.page))
			}
		})
	}
}
