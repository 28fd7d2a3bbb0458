package traceplot

import (
	"testing"

	"github.com/torchmem/torchmem/internal/snapshottest"
)

// TestSecurityBounds: SECURITY.md states the trace_plot reader's bounds as
// the code has them.
func TestSecurityBounds(t *testing.T) {
	snapshottest.CheckSecurityBounds(t, "traceplot.", map[string]int64{
		"allocFrameBase":     allocFrameBase,
		"allocFramesPerByte": allocFramesPerByte,
	})
}
