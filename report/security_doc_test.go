package report

import (
	"testing"

	"github.com/torchmem/torchmem/internal/snapshottest"
)

// TestSecurityBounds: SECURITY.md states the HTML page's bounds as the code
// has them.
func TestSecurityBounds(t *testing.T) {
	snapshottest.CheckSecurityBounds(t, "report.", map[string]int64{
		"DefaultHTMLMaxBytes":  DefaultHTMLMaxBytes,
		"DefaultHTMLMaxPoints": DefaultHTMLMaxPoints,
		"maxListItems":         maxListItems,
	})
}
