package snapshot_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// TestMeasuredSnapshots checks the snapshots this repository recorded on an
// H200 (testdata/estimate/measured) against measuredSnapshotFacts, and
// fails when one has no row.
func TestMeasuredSnapshots(t *testing.T) {
	dir, files := st.MeasuredSnapshots(t)
	var inTable []string
	for _, f := range measuredSnapshotFacts {
		inTable = append(inTable, f.File)
	}
	slices.Sort(inTable)
	if diff := cmp.Diff(files, inTable); diff != "" {
		t.Errorf("testdata/estimate/measured and the facts table list different snapshots; rerun testdata/facts/snapshot_facts.py --measured (-folder +table):\n%s", diff)
	}
	checkFactsTable(t, dir, measuredSnapshotFacts)
}
