package snapshot

import (
	"testing"

	st "github.com/torchmem/torchmem/snapshot/snapshottest"
)

// traceFile returns the path of a real trace in ../shared/traces.
func traceFile(t testing.TB, name string) string {
	t.Helper()
	return st.SharedFile(t, "traces", name)
}
