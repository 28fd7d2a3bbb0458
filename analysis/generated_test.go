package analysis

import (
	"bytes"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// TestGeneratedTrainingRun: the benchmarks' generated training runs (both
// shapes) are healthy training loops whose iterations repeat: every
// ProfilerStep is found, the steps after the first three have the same peak
// and end where they began, the trace agrees with the dump, nothing leaks,
// and at the end gradients equal the parameters and AdamW's state twice
// them.
func TestGeneratedTrainingRun(t *testing.T) {
	for _, shared := range []bool{false, true} {
		var buf bytes.Buffer
		if _, err := st.WriteTraining(&buf, st.TrainingConfig{TargetBytes: 2 << 20, SharedStacks: shared}); err != nil {
			t.Fatal(err)
		}
		s, err := load.Read(bytes.NewReader(buf.Bytes()), "train.pickle", int64(buf.Len()), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		steps := 0
		for _, a := range s.Annotations {
			if a.Kind == snapshot.AnnotationStep {
				steps++
			}
		}
		r := Analyze(s, DefaultOptions())
		d := r.Devices[0]
		if d.Steps == nil || len(d.Steps.Spans) != steps || steps < 8 {
			t.Fatalf("shared %v: %d ProfilerStep ranges, the analysis found %+v", shared, steps, d.Steps)
		}
		spans := d.Steps.Spans
		for _, sp := range spans[3:] {
			if sp.PeakAllocatedBytes != spans[3].PeakAllocatedBytes || sp.StartAllocatedBytes != sp.EndAllocatedBytes {
				t.Errorf("shared %v: step %d peaks at %d (step 4: %d), starts at %d, ends at %d", shared, sp.Step,
					sp.PeakAllocatedBytes, spans[3].PeakAllocatedBytes, sp.StartAllocatedBytes, sp.EndAllocatedBytes)
			}
		}
		for _, g := range r.Diagnostics {
			if g.Kind == "replay_mismatch" || g.Kind == "address_reuse" || g.Kind == "unmatched_frees" {
				t.Errorf("shared %v: %s", shared, g.Message)
			}
		}
		if len(r.Leaks) != 0 {
			t.Errorf("shared %v: leaks in a healthy loop: %+v", shared, r.Leaks)
		}
		c := d.AtEnd.Categories
		if c[result.Gradient] != c[result.Parameter] || c[result.OptimizerState] != 2*c[result.Parameter] || c[result.Parameter] == 0 {
			t.Errorf("shared %v: at the end parameters %d, gradients %d, optimizer state %d", shared, c[result.Parameter], c[result.Gradient], c[result.OptimizerState])
		}
		if d.Peak.Phase != result.PhaseForward {
			t.Errorf("shared %v: peak in %s, want forward", shared, d.Peak.Phase)
		}
	}
}
