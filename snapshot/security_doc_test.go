package snapshot

import (
	"testing"

	"github.com/torchmem/torchmem/internal/snapshottest"
)

// TestSecurityBounds: SECURITY.md states the readers' bounds as the code
// has them.
func TestSecurityBounds(t *testing.T) {
	snapshottest.CheckSecurityBounds(t, "snapshot.", map[string]int64{
		"DefaultMaxInputBytes":  DefaultMaxInputBytes,
		"DefaultMaxStringBytes": DefaultMaxStringBytes,
		"DefaultMaxDepth":       DefaultMaxDepth,
		"DefaultMaxMemo":        DefaultMaxMemo,
		"DefaultMaxValues":      DefaultMaxValues,
		"DefaultMaxValueBytes":  DefaultMaxValueBytes,
		"DefaultMaxDevices":     DefaultMaxDevices,
		"maxNameBytes":          MaxNameBytes,
	})
}
