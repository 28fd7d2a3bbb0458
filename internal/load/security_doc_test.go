package load

import (
	"testing"

	"github.com/torchmem/torchmem/internal/snapshottest"
)

// TestSecurityBounds: SECURITY.md states the loader's bounds as the code
// has them.
func TestSecurityBounds(t *testing.T) {
	snapshottest.CheckSecurityBounds(t, "load.", map[string]int64{
		"gzipExpansionBase":  gzipExpansionBase,
		"gzipExpansionRatio": gzipExpansionRatio,
	})
}
