package analysis

import (
	"testing"

	"github.com/torchmem/torchmem/internal/snapshottest"
)

// TestSecurityBounds: SECURITY.md states the memory per byte of input
// TestMemoryPerInputByte measures, and the CPU time per byte
// TestCPUPerInputByte measures, as the code has them.
func TestSecurityBounds(t *testing.T) {
	snapshottest.CheckSecurityBounds(t, "analysis.", map[string]int64{
		"cpuNanosPerInputByte":       cpuNanosPerInputByte,
		"modelBytesPerInputByte":     modelBytesPerInputByte,
		"allocatedBytesPerInputByte": allocatedBytesPerInputByte,
	})
}
