package analysis

import (
	"testing"

	"github.com/torchmem/torchmem/internal/snapshottest"
)

// TestSecurityBounds: SECURITY.md states the memory per byte of input
// TestMemoryPerInputByte measures as the code has it.
func TestSecurityBounds(t *testing.T) {
	snapshottest.CheckSecurityBounds(t, "analysis.", map[string]int64{
		"modelBytesPerInputByte":     modelBytesPerInputByte,
		"allocatedBytesPerInputByte": allocatedBytesPerInputByte,
	})
}
