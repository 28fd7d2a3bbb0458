package analysis

import (
	"testing"

	"github.com/torchmem/torchmem/snapshot/snapshottest"
)

// TestSecurityBounds: SECURITY.md states the bounds of an analysis read
// back, and the memory per byte of input TestMemoryPerInputByte measures,
// as the code has them.
func TestSecurityBounds(t *testing.T) {
	snapshottest.CheckSecurityBounds(t, "analysis.", map[string]int64{
		"MaxResultBytes":             MaxResultBytes,
		"MaxResultItems":             MaxResultItems,
		"resultAllocPerByte":         resultAllocPerByte,
		"resultAllocPerItem":         resultAllocPerItem,
		"cpuNanosPerInputByte":       cpuNanosPerInputByte,
		"MaxResultString":            MaxResultString,
		"MaxFigureBytes":             MaxFigureBytes,
		"modelBytesPerInputByte":     modelBytesPerInputByte,
		"allocatedBytesPerInputByte": allocatedBytesPerInputByte,
	})
}
