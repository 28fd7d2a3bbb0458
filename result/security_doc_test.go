package result

import (
	"testing"

	"github.com/torchmem/torchmem/internal/snapshottest"
)

// TestSecurityBounds: SECURITY.md states the bounds of an analysis read
// back, and the memory reading one back may take, as the code has them.
func TestSecurityBounds(t *testing.T) {
	snapshottest.CheckSecurityBounds(t, "result.", map[string]int64{
		"MaxResultBytes":     MaxResultBytes,
		"MaxResultItems":     MaxResultItems,
		"MaxResultString":    MaxResultString,
		"MaxFigureBytes":     MaxFigureBytes,
		"resultAllocPerByte": resultAllocPerByte,
		"resultAllocPerItem": resultAllocPerItem,
	})
}
