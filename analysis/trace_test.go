package analysis

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/result"
)

// TestHTATrainingTrace checks steps, phases and peaks on HTA's DDP training
// trace (V100, torch.compile, SGD): checked by hand (python3), step-end
// Total Allocated = 4,096,614,400 B (the pre-window baseline) and a peak of
// 6,629,508,096 B in each of ProfilerStep#2..6, with Total Reserved constant
// at 12,782,141,440. A python3 check (json+gzip) of the same file gave, per
// step, 5,354 GPU memory events, 1,393 of them inside the forward
// (CompiledFunction) with a maximum Total Allocated of 5,439,832,064, and no
// event inside Optimizer.zero_grad or Optimizer.step (SGD without momentum
// allocates nothing); Total Allocated when each Optimizer.step begins is
// 4,100,809,216 and when each zero_grad begins 4,096,614,400.
func TestHTATrainingTrace(t *testing.T) {
	s := analysistest.OpenShared(t, "traces", "hta_ddp_training_gpu_memory.json.gz")
	r := Analyze(s, DefaultOptions())
	var d *result.DeviceResult
	for i := range r.Devices {
		if r.Devices[i].Device == 1 {
			d = &r.Devices[i]
		}
	}
	if d == nil {
		t.Fatalf("no device 1 among %d devices", len(r.Devices))
	}
	if d.AtEnd.AllocatedBytes != 4_096_614_400 || d.AtEnd.ReservedBytes != 12_782_141_440 {
		t.Errorf("at end %d allocated, %d reserved; want 4,096,614,400 and 12,782,141,440", d.AtEnd.AllocatedBytes, d.AtEnd.ReservedBytes)
	}
	if d.Peak.AllocatedBytes != 6_629_508_096 || d.Peak.Step != 2 || d.Peak.Phase != result.PhaseBackward {
		t.Errorf("peak %d in step %d %s, want 6,629,508,096 in step 2 backward", d.Peak.AllocatedBytes, d.Peak.Step, d.Peak.Phase)
	}

	h := history.Build(s, s.Device(1))
	type step struct {
		Step             int
		Start, End, Peak int64
		Events           int
	}
	var got []step
	for _, st := range h.Steps.Spans {
		got = append(got, step{st.Step, st.StartAllocatedBytes, st.EndAllocatedBytes, st.PeakAllocatedBytes, st.EndEvent - st.StartEvent + 1})
	}
	var want []step
	for n := 2; n <= 6; n++ {
		want = append(want, step{n, 4_096_614_400, 4_096_614_400, 6_629_508_096, 5354})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}

	// Every step runs zero_grad, forward, backward, optimizer, in that order;
	// zero_grad and the optimizer step touch no GPU memory.
	type span struct {
		Phase  result.Phase
		Events int
		Peak   int64
	}
	byStep := map[int][]span{}
	for _, p := range d.Phases {
		if p.Phase == result.PhaseUnknown {
			continue
		}
		sp := span{p.Phase, p.Events, p.PeakAllocatedBytes}
		if p.Phase == result.PhaseBackward {
			sp.Events = 0 // checked below, with the step's remainder
		}
		byStep[p.Step] = append(byStep[p.Step], sp)
	}
	for n := 2; n <= 6; n++ {
		want := []span{
			{result.PhaseZeroGrad, 0, 4_096_614_400},
			{result.PhaseForward, 1393, 5_439_832_064},
			{result.PhaseBackward, 0, 6_629_508_096},
			{result.PhaseOptimizer, 0, 4_100_809_216},
		}
		if diff := cmp.Diff(want, byStep[n]); diff != "" {
			t.Errorf("step %d phases (-want +got):\n%s", n, diff)
		}
	}
	// Forward + backward + the rest account for every event of a step.
	for n := 2; n <= 6; n++ {
		total := 0
		for _, p := range d.Phases {
			if p.Step == n {
				total += p.Events
			}
		}
		if total != 5354 {
			t.Errorf("step %d: spans hold %d events, want 5,354", n, total)
		}
	}
}
