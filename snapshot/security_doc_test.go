package snapshot

import (
	"testing"

	"github.com/torchmem/torchmem/snapshot/snapshottest"
)

// TestSecurityBounds: SECURITY.md states the readers' bounds as the code
// has them.
func TestSecurityBounds(t *testing.T) {
	snapshottest.CheckSecurityBounds(t, "snapshot.", map[string]int64{
		"DefaultMaxInputBytes":  DefaultMaxInputBytes,
		"DefaultMaxStringBytes": DefaultMaxStringBytes,
		"DefaultMaxDepth":       DefaultMaxDepth,
		"DefaultMaxMemo":        DefaultMaxMemo,
		"memoBytesPerEntry":     memoBytesPerEntry,
		"DefaultMaxValues":      DefaultMaxValues,
		"DefaultMaxValueBytes":  DefaultMaxValueBytes,
		"DefaultMaxDevices":     DefaultMaxDevices,
		"maxRendered":           maxRendered,
		"expansionBase":         expansionBase,
		"expansionPerByte":      expansionPerByte,
		"maxLongBytes":          maxLongBytes,
		"maxTokenBytes":         maxTokenBytes,
		"maxDeepBytes":          maxDeepBytes,
		"longGap":               longGap,
		"keepSpace":             keepSpace,
		"allocFrameBase":        allocFrameBase,
		"allocFramesPerByte":    allocFramesPerByte,
	})
}
