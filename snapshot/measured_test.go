package snapshot_test

import (
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// TestMeasuredSnapshots checks the snapshots this repository recorded on an
// H200 (testdata/estimate/measured) against measuredSnapshotFacts, and
// fails when one has no row.
func TestMeasuredSnapshots(t *testing.T) {
	dir, files := st.MeasuredSnapshots(t)
	checkTableListsFolder(t, "testdata/estimate/measured", files, measuredSnapshotFacts, "--measured")
	checkFactsTable(t, dir, measuredSnapshotFacts)
}
