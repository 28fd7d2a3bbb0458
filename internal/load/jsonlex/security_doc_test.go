package jsonlex

import (
	"testing"

	"github.com/torchmem/torchmem/internal/snapshottest"
)

// TestJSONLexSecurityBounds: SECURITY.md states the sanitiser's bounds as
// the code has them.
func TestJSONLexSecurityBounds(t *testing.T) {
	snapshottest.CheckSecurityBounds(t, "jsonlex.", map[string]int64{
		"MaxTokenBytes": MaxTokenBytes,
		"maxDeepBytes":  maxDeepBytes,
		"LongGap":       LongGap,
		"keepSpace":     keepSpace,
	})
}
