package load_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// writeTemp writes data to a file of the test's own and returns its path.
func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// generated are pickles of the shapes the mapped reader must read as the
// streaming one does: fresh and shared frames lists, the protocol-2 keys
// of an older PyTorch, the synthetic long run, a small one and, past the
// decoder's 256 KiB window, ones it crosses many times.
func generated(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, c := range []struct {
		name string
		cfg  st.TrainingConfig
	}{
		{"training-3MB", st.TrainingConfig{TargetBytes: 3 << 20}},
		{"training-shared-2MB", st.TrainingConfig{TargetBytes: 2 << 20, SharedStacks: true}},
		{"training-E-1MB", st.TrainingConfig{TargetBytes: 1 << 20, Gen: 'E'}},
		{"training-small-6layers", st.TrainingConfig{TargetBytes: 600 << 10, Model: st.LeakConfig{Layers: 6, Hidden: 256, Tokens: 512, Vocab: 1000}}},
	} {
		var b bytes.Buffer
		if _, err := st.WriteTraining(&b, c.cfg); err != nil {
			t.Fatal(err)
		}
		out[c.name] = b.Bytes()
	}
	var b bytes.Buffer
	if _, err := st.WriteBig(&b, st.BigConfig{TargetBytes: 2 << 20, Seed: 7, Frames: 90, Stacks: 40}); err != nil {
		t.Fatal(err)
	}
	out["big-2MB"] = b.Bytes()
	return out
}

// TestMappedSameAsRead: a pickle opened from a file (mapped in place) gives
// the snapshot that reading the same bytes from a stream gives, field for
// field, for generated shapes and every real snapshot; and the same error,
// offset included, for the same bytes cut short or corrupted.
func TestMappedSameAsRead(t *testing.T) {
	inputs := generated(t)
	for _, path := range st.RealSnapshots(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		inputs[filepath.Base(path)] = data
	}
	cuts := 0
	for name, data := range inputs {
		variants := map[string][]byte{name: data}
		if len(data) > 1000 && data[0] == 0x80 {
			variants[name+"/cut-at-half"] = data[:len(data)/2]
			bad := bytes.Clone(data)
			bad[len(bad)*2/3] = 0xff // not an opcode
			variants[name+"/bad-opcode"] = bad
			cuts++
		}
		for vname, v := range variants {
			path := writeTemp(t, "in.pickle", v)
			mapped, merr := load.Open(path, snapshot.Options{})
			read, rerr := load.Read(bytes.NewReader(v), path, int64(len(v)), snapshot.Options{})
			if (merr == nil) != (rerr == nil) || (merr != nil && merr.Error() != rerr.Error()) {
				t.Errorf("%s: opened: %v; read: %v", vname, merr, rerr)
				continue
			}
			if merr == nil && !reflect.DeepEqual(mapped, read) {
				t.Errorf("%s: the opened snapshot differs from the one read", vname)
			}
		}
	}
	if cuts < 5 {
		t.Errorf("%d inputs were cut and corrupted, want at least the 5 generated", cuts)
	}
}
