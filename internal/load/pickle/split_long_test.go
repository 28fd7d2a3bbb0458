package pickle

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// lengthen is the Python that makes a real snapshot long: each device's
// trace entries repeated until it has at least the given number, each a
// new dict and a new frames list that share the frame dicts, as PyTorch's
// _snapshot builds them, pickled again by CPython (protocol 4, its FRAMEs).
// The snapshot is read by an unpickler that refuses every global: a
// snapshot is data.
const lengthen = `
import gzip, pickle, sys
class Data(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("a global in a snapshot")
src, dst, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
with (gzip.open if src.endswith(".gz") else open)(src, "rb") as f:
    s = Data(f).load()
for d, trace in enumerate(s["device_traces"]):
    if not trace:
        continue
    base, out = list(trace), []
    while len(out) < want:
        for e in base:
            c = dict(e)
            if isinstance(c.get("frames"), list):
                c["frames"] = list(c["frames"])
            out.append(c)
    s["device_traces"][d] = out
with open(dst, "wb") as f:
    pickle.dump(s, f, protocol=4)
`

// TestSplitLongRealSnapshots: every real snapshot of ../shared, made long
// enough for the second decoder (see lengthen), read with it and without
// it: the same model, and some of its entries kept on those it must. Their shapes
// are what the generators' are not: PyTorch 2.2's segment_free entries
// without frames among entries with them, Python-only stacks, a Hugging
// Face run's user metadata, FRAMEs as CPython writes them.
func TestSplitLongRealSnapshots(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("TORCHMEM_REQUIRE_PYTHON") != "" {
			t.Fatalf("python3 is required: %v", err)
		}
		t.Skip("no python3")
	}
	opts := snapshot.Options{}.WithDefaults()
	// The second decoder must keep entries on these (it keeps some on 24
	// of the 33 made long; on the others the model must still match).
	mustSplit := map[string]bool{
		"genC_torch2.2_nesta_OOM_pickle_named_json.pickle": true,
		"genG_torch2.10x_magma27_python_stacks.pickle":     true,
		"hf_llama_mixed_ckpt_train.pickle.gz":              true,
	}
	var files []struct{ sub, name string }
	for _, sub := range []string{"snapshots", "recorded"} {
		dir := snapshottest.SharedDir(t, sub)
		for _, pat := range []string{"*.pickle", "*.pickle.gz", "*/*.pickle", "*/*.pickle.gz"} {
			m, _ := filepath.Glob(filepath.Join(dir, pat))
			for _, p := range m {
				rel, _ := filepath.Rel(dir, p)
				files = append(files, struct{ sub, name string }{sub, rel})
			}
		}
	}
	for name := range mustSplit {
		if !slices.ContainsFunc(files, func(f struct{ sub, name string }) bool { return f.name == name }) {
			t.Errorf("%s not among the real snapshots", name)
		}
	}
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			src := snapshottest.SharedFile(t, f.sub, f.name)
			dst := filepath.Join(t.TempDir(), "long.pickle")
			if out, err := exec.Command(python, "-c", lengthen, src, dst, "60000").CombinedOutput(); err != nil {
				t.Fatalf("lengthen: %v\n%s", err, out)
			}
			data, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			want, _, err := splitRead(data, opts, 1<<62, -1, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, patient := range []bool{true, false} {
				got, took, err := splitRead(data, opts, splitAfterTest, -1, patient, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("patient %v: the model differs from the sequential one (%d entries read by the second decoder)", patient, took)
				}
				if patient && took == 0 && mustSplit[f.name] {
					t.Errorf("the second decoder's entries were not kept")
				}
				t.Logf("patient %v: %d entries read by the second decoder", patient, took)
			}
		})
	}
}
