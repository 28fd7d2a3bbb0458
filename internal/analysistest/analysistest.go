// Package analysistest holds what the tests of analysis and its
// sub-packages share to make their inputs: simulated snapshots read back
// through the reader, and the real files in ../shared. Tests only: it is
// never linked into the binary, and it imports no analysis package, so the
// tests of every pass can use it.
package analysistest

import (
	"bytes"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// MiB is 2²⁰ bytes, the unit the fixtures' sizes are written in.
const MiB = 1 << 20

// Read pickles a simulated snapshot and reads it back, first dropping the
// first drop trace entries of device 0 (what recording began after, or a
// ring buffer lost).
func Read(t testing.TB, s *st.Sim, drop int) *snapshot.Snapshot {
	t.Helper()
	dict := s.Snapshot()
	if drop > 0 {
		for i, k := range dict.Keys {
			if k == "device_traces" {
				dev0 := dict.Vals[i].(*st.List).Items[0].(*st.List)
				dev0.Items = dev0.Items[drop:]
			}
		}
	}
	data := st.Marshal(dict, 4)
	snap, err := load.Read(bytes.NewReader(data), "fixture.pickle", int64(len(data)), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TraceLen is the number of trace entries the simulator has recorded on
// device 0 so far.
func TraceLen(s *st.Sim) int {
	dict := s.Snapshot()
	for i, k := range dict.Keys {
		if k == "device_traces" {
			return len(dict.Vals[i].(*st.List).Items[0].(*st.List).Items)
		}
	}
	return 0
}

// OpenShared reads a real file from ../shared.
func OpenShared(t testing.TB, sub, name string) *snapshot.Snapshot {
	t.Helper()
	s, err := load.Open(st.SharedFile(t, sub, name), snapshot.Options{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

// Open reads a real file by its path (one of snapshottest.SharedInputs).
func Open(t testing.TB, path string) *snapshot.Snapshot {
	t.Helper()
	s, err := load.Open(path, snapshot.Options{})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

// ReadJSON reads a chrome trace from its bytes.
func ReadJSON(t testing.TB, js []byte) *snapshot.Snapshot {
	t.Helper()
	s, err := load.Read(bytes.NewReader(js), "trace.json", int64(len(js)), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
