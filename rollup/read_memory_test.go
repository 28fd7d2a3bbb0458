package rollup

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// TestReadSummariesMemory: merge's reader allocates within what SECURITY.md
// states for reading an analysis back (result.resultAllocPerByte per byte
// of JSON plus result.resultAllocPerItem per array item), for an
// analysis as torchmem writes it — alone, or an input of a roll-up — and
// for the densest, empty objects; an analysis is held without its
// whitespace, and at most result.MaxResultBytes of it. (It held the
// JSON twice and a 183 MB summary took 1.56 GB.)
func TestReadSummariesMemory(t *testing.T) {
	doc := st.SecurityBounds(t)
	perByte, perItem := uint64(doc["result.resultAllocPerByte"]), uint64(doc["result.resultAllocPerItem"])
	if perByte == 0 || perItem == 0 {
		t.Fatal("SECURITY.md states no figures for reading an analysis back")
	}
	r := &result.Result{Schema: result.SchemaID, Input: result.Input{Path: "run.pickle", Format: "snapshot"}}
	for d := range 8 {
		dr := result.DeviceResult{Device: d, Kind: "cuda"}
		for i := range 5000 {
			dr.Phases = append(dr.Phases, result.PhaseSpan{Phase: result.PhaseForward, Step: i, StartUS: int64(i) * 1000, EndUS: int64(i)*1000 + 500, PeakAllocatedBytes: 123456789})
		}
		for i := range 500 {
			dr.TopSites = append(dr.TopSites, result.Site{Site: fmt.Sprintf("model_%04d.py:%d forward_%s", i, i, strings.Repeat("x", 60)), Bytes: 1 << 20})
		}
		r.Devices = append(r.Devices, dr)
	}
	indented, _ := json.MarshalIndent(r, "", "  ")
	half := strings.TrimSuffix(strings.Repeat("{},", 128<<10), ",")
	dense := `{"schema": "torchmem.analysis/v1", "devices": [{"device": 0, "phases": [` + half + `]}], "leaks": [` + half + `]}`
	for _, c := range []struct {
		name  string
		data  []byte
		items int
	}{
		{"an analysis", indented, 8 * 5501},
		{"a roll-up's input", []byte(`{"schema": "torchmem.rollup/v1", "inputs": [` + string(indented) + `]}`), 8 * 5501},
		{"empty objects", []byte(dense), 1 + 256<<10},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			read := 0
			n := st.HeapAllocated(func() {
				err = ReadSummaries(bytes.NewReader(c.data), "s.json", 8<<30, func(*result.Result) error { read++; return nil })
			})
			if err != nil || read != 1 {
				t.Fatalf("%d analyses read: %v", read, err)
			}
			bound := perByte*uint64(len(c.data)) + perItem*uint64(c.items)
			t.Logf("%d bytes, %d items: %d allocated (%.1f a byte, %.0f an item)", len(c.data), c.items, n, float64(n)/float64(len(c.data)), float64(n)/float64(c.items))
			if n > bound {
				t.Errorf("allocated %d bytes, more than %d (%d a byte, %d an item)", n, bound, perByte, perItem)
			}
		})
	}
}
