package kineto_test

import (
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// traceFile returns the path of a real trace in ../shared/traces, or in
// ../shared/recorded for a name "recorded/…".
func traceFile(t testing.TB, name string) string {
	t.Helper()
	if rest, ok := strings.CutPrefix(name, "recorded/"); ok {
		return st.SharedFile(t, "recorded", rest)
	}
	return st.SharedFile(t, "traces", name)
}
