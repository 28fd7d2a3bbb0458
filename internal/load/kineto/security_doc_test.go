package kineto

import (
	"testing"

	"github.com/torchmem/torchmem/internal/snapshottest"
)

// TestKinetoSecurityBounds: SECURITY.md states the chrome trace reader's
// bounds as the code has them.
func TestKinetoSecurityBounds(t *testing.T) {
	snapshottest.CheckSecurityBounds(t, "kineto.", map[string]int64{
		"maxLexBuffer": maxLexBuffer,
	})
}
