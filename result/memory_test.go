package result

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// What reading an analysis JSON back (diff, check --baseline, merge)
// allocates in all, an upper bound on what it holds: resultAllocPerByte
// per byte of the JSON plus resultAllocPerItem per item of its arrays
// (SECURITY.md states both; TestSecurityBounds checks them).
const (
	// resultAllocPerByte: measured 2.0–9.2 a byte on phase rows and sites,
	// indented or compact (compact, 20 before: every object of the JSON was
	// parsed, copied and parsed again to find its nulls, and a path was
	// formatted for every item).
	resultAllocPerByte = 12
	// resultAllocPerItem: the densest JSON, empty objects ("leaks": [{},
	// {}, …]: 176 bytes a leak, and the slice grown as it fills), measured
	// 856–872 an item (2,200 before).
	resultAllocPerItem = 1200
)

// resultJSONShapes are an analysis as torchmem writes it (indented), of
// many phase rows and sites (about 11 MB), the same compact, and the
// densest one of n empty leaks and phase rows, each with the number of its
// array items.
func resultJSONShapes(n int) []struct {
	name  string
	data  []byte
	items int
} {
	r := &Result{Schema: SchemaID, Input: Input{Path: "run.pickle", Format: "snapshot"}}
	for d := range 8 {
		dr := DeviceResult{Device: d, Kind: "cuda"}
		for i := range 5000 {
			dr.Phases = append(dr.Phases, PhaseSpan{Phase: PhaseForward, Step: i, StartUS: int64(i) * 1000, EndUS: int64(i)*1000 + 500, PeakAllocatedBytes: 123456789})
		}
		for i := range 500 {
			dr.TopSites = append(dr.TopSites, Site{Site: fmt.Sprintf("model_%04d.py:%d forward_%s", i, i, strings.Repeat("x", 60)), Bytes: 1 << 20, Count: 3})
		}
		r.Devices = append(r.Devices, dr)
	}
	indented, _ := json.MarshalIndent(r, "", "  ")
	compact, _ := json.Marshal(r)
	half := strings.TrimSuffix(strings.Repeat("{},", n/2), ",")
	dense := []byte(`{"schema": "torchmem.analysis/v1", "devices": [{"device": 0, "phases": [` + half + `]}], "leaks": [` + half + `]}`)
	return []struct {
		name  string
		data  []byte
		items int
	}{{"indented", indented, 8 * 5501}, {"compact", compact, 8 * 5501}, {"empty objects", dense, 1 + n/2*2}}
}

// TestResultReadMemory: reading an analysis back allocates at most
// resultAllocPerByte per byte of its JSON plus resultAllocPerItem per
// array item, for JSON as torchmem writes it and for the densest — the
// runtime's counts, not a clock. (A 183 MB analysis took 1.56 GB in merge.)
func TestResultReadMemory(t *testing.T) {
	readers := []struct {
		name string
		read func([]byte) (*Result, error)
	}{
		{"ReadResult", func(b []byte) (*Result, error) { return ReadResult(bytes.NewReader(b), "a.json", SchemaID, 8<<30) }},
		{"DecodeResult", DecodeResult},
	}
	for _, shape := range resultJSONShapes(256 << 10) {
		for _, rd := range readers {
			t.Run(shape.name+"/"+rd.name, func(t *testing.T) {
				var err error
				n := st.HeapAllocated(func() { _, err = rd.read(shape.data) })
				if err != nil {
					t.Fatal(err)
				}
				bound := resultAllocPerByte*uint64(len(shape.data)) + resultAllocPerItem*uint64(shape.items)
				t.Logf("%d bytes, %d items: %d allocated (%.1f a byte, %.0f an item)", len(shape.data), shape.items, n,
					float64(n)/float64(len(shape.data)), float64(n)/float64(shape.items))
				if n > bound {
					t.Errorf("allocated %d bytes, more than %d a byte and %d an item (%d)", n, resultAllocPerByte, resultAllocPerItem, bound)
				}
			})
		}
	}
}
