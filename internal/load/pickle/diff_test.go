package pickle_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/load/pickle"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestStreamingMatchesReference decodes every real snapshot with the
// streaming decoder and with gopickle, and requires the same model.
func TestStreamingMatchesReference(t *testing.T) {
	for _, path := range st.RealSnapshots(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			fast, err := load.Open(path, snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ref, err := pickle.ReadReference(f, path)
			if err != nil {
				t.Fatal(err)
			}
			// Source facts differ by construction (sizes, protocol); compare the rest.
			fast.Source, ref.Source = snapshot.Source{}, snapshot.Source{}
			if diff := cmp.Diff(canonical(ref), canonical(fast), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("streaming decoder differs from gopickle (-ref +fast):\n%s", diff)
			}
		})
	}
}

// canonical renumbers frames and stacks in a fixed traversal order, so that
// two models that differ only in interning order compare equal.
func canonical(s *snapshot.Snapshot) *snapshot.Snapshot {
	b := snapshot.NewBuilder(snapshot.Source{})
	restack := func(id snapshot.StackID) snapshot.StackID {
		var fr []snapshot.FrameID
		for _, f := range s.StackOf(id) {
			fr = append(fr, b.Frame(s.Frames[f]))
		}
		return b.Stack(fr)
	}
	out := *s
	out.Devices = nil
	for _, d := range s.Devices {
		nd := *d
		nd.Segments = append([]snapshot.Segment(nil), d.Segments...)
		for i := range nd.Segments {
			g := &nd.Segments[i]
			g.Blocks = append([]snapshot.Block(nil), g.Blocks...)
			for j := range g.Blocks {
				g.Blocks[j].Stack = restack(g.Blocks[j].Stack)
			}
			g.Stack = restack(g.Stack)
		}
		nd.Events = append([]snapshot.Event(nil), d.Events...)
		for i := range nd.Events {
			nd.Events[i].Stack = restack(nd.Events[i].Stack)
		}
		out.Devices = append(out.Devices, &nd)
	}
	out.Frames, out.Stacks = b.Snap.Frames, b.Snap.Stacks
	return &out
}

// TestGeneratedTrainingMatchesReference decodes the benchmarks' generated
// training runs (both shapes: fresh frames lists whose free_completed
// shares its free_requested's list, and lists shared through the memo)
// with the streaming decoder and with gopickle, and requires the same
// model and the size of an entry that each shape is made to have.
func TestGeneratedTrainingMatchesReference(t *testing.T) {
	for _, c := range []struct {
		name           string
		cfg            st.TrainingConfig
		minEntry, maxE float64
	}{
		{"fresh lists", st.TrainingConfig{TargetBytes: 3 << 20}, 140, 220},
		{"shared lists", st.TrainingConfig{TargetBytes: 3 << 20, SharedStacks: true, Gen: 'E'}, 50, 70},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			entries, err := st.WriteTraining(&buf, c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			fast, err := load.Read(bytes.NewReader(buf.Bytes()), "train.pickle", int64(buf.Len()), snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(fast.Devices[0].Events); n != entries {
				t.Fatalf("read %d entries, the generator wrote %d", n, entries)
			}
			if per := float64(buf.Len()) / float64(entries); per < c.minEntry || per > c.maxE {
				t.Errorf("%.0f bytes an entry, want %.0f–%.0f", per, c.minEntry, c.maxE)
			}
			ref, err := pickle.ReadReference(bytes.NewReader(buf.Bytes()), "train.pickle")
			if err != nil {
				t.Fatal(err)
			}
			fast.Source, ref.Source = snapshot.Source{}, snapshot.Source{}
			if diff := cmp.Diff(canonical(ref), canonical(fast), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("streaming decoder differs from gopickle (-ref +fast):\n%s", diff)
			}
		})
	}
}
