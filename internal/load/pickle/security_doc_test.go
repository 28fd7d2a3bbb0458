package pickle

import (
	"testing"

	"github.com/torchmem/torchmem/internal/snapshottest"
)

// TestSecurityBounds: SECURITY.md states the pickle reader's bounds as the
// code has them.
func TestSecurityBounds(t *testing.T) {
	snapshottest.CheckSecurityBounds(t, "pickle.", map[string]int64{
		"memoBytesPerEntry": memoBytesPerEntry,
		"MaxShortTexts":     MaxShortTexts,
		"ShortTextBytes":    ShortTextBytes,
		"MaxRendered":       MaxRendered,
		"expansionBase":     expansionBase,
		"expansionPerByte":  expansionPerByte,
		"maxLongBytes":      maxLongBytes,
	})
}
