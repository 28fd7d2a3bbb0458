package kineto_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestTraceFixtureTinyTrainStep reads testdata/traces/tiny_train_step.json.gz
// (written by gen_tiny_train_step.py beside it); the expected numbers were
// recomputed from the file with python3's json and gzip modules.
func TestTraceFixtureTinyTrainStep(t *testing.T) {
	s, err := load.Open(snapshottest.RepoFile("testdata", "traces", "tiny_train_step.json.gz"), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkTraceInvariants(t, s)
	wantKeys := []string{"schemaVersion", "deviceProperties", "cupti_version", "profile_memory", "with_stack", "record_shapes",
		"metadata", "trace_id", "displayTimeUnit", "baseTimeNanoseconds", "traceEvents", "traceName"}
	if diff := cmp.Diff(wantKeys, s.Source.Keys); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	if s.Source.Generation != "2024+" || s.Recording != snapshot.RecordingProfilerStacks || !s.Source.Gzipped {
		t.Errorf("source %+v, recording %q", s.Source, s.Recording)
	}
	if diff := cmp.Diff([]devFact{{-1, snapshot.DeviceCPU, 4, 0}, {0, snapshot.DeviceCUDA, 19, 1_048_576}}, traceDeviceFacts(s)); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
	gpu := s.Device(0)
	if gpu.Name != "NVIDIA H100 80GB HBM3" || gpu.CapacityBytes != 85_045_477_376 || !cmp.Equal(gpu.Reserved, []snapshot.CounterPoint{{Event: 0, Value: 2_097_152}}) {
		t.Errorf("device 0: %q %d %v", gpu.Name, gpu.CapacityBytes, gpu.Reserved)
	}
	if diff := cmp.Diff(map[snapshot.AnnotationKind]int{snapshot.AnnotationStep: 2, snapshot.AnnotationZeroGrad: 2, snapshot.AnnotationForward: 2, snapshot.AnnotationBackward: 2, snapshot.AnnotationOptStep: 2}, annotationCounts(s)); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	var steps []string
	for _, a := range s.Annotations {
		switch a.Kind {
		case snapshot.AnnotationStep:
			end, peak := replay(gpu, a.StartNS, a.EndNS)
			steps = append(steps, fmt.Sprintf("%s %d..%d end=%d peak=%d", a.Name, a.StartNS, a.EndNS, end, peak))
		case snapshot.AnnotationBackward:
			steps = append(steps, fmt.Sprintf("backward %d..%d on %s", a.StartNS, a.EndNS, s.Threads[a.Thread].Name))
		}
	}
	wantSteps := []string{
		"ProfilerStep#1 1700000000001000000..1700000000001900000 end=1064960 peak=1064960",
		"backward 1700000000001400000..1700000000001620000 on thread 200 (pt_autograd_0)",
		"ProfilerStep#2 1700000000002000000..1700000000002900000 end=1064960 peak=1071104",
		"backward 1700000000002400000..1700000000002620000 on thread 200 (pt_autograd_0)",
	}
	if diff := cmp.Diff(wantSteps, steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	ev := eventFacts(s, gpu)
	if diff := cmp.Diff(evFact{snapshot.ActionAlloc, 0x7F0000100000, 4096, 1700000000001060000, "aten::addmm",
		[]string{"aten::addmm", "aten::linear", "nn.Module: Net_0", "train.py:20 train_step", "ProfilerStep#1"}}, ev[0]); diff != "" {
		t.Errorf("first event (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(evFact{snapshot.ActionAlloc, 0x7F00000F0000, 8192, 1700000000001510000, "aten::mm",
		[]string{"aten::mm", "AddmmBackward0", "autograd::engine::evaluate_function: AddmmBackward0"}}, ev[6]); diff != "" {
		t.Errorf("gradient event (-want +got):\n%s", diff)
	}
	if last := gpu.Events[len(gpu.Events)-1]; last.Action != snapshot.ActionOOM || last.Size != 1<<30 || last.TimeNS != 1700000000002950000 {
		t.Errorf("last event %+v", last)
	}
	var grads []string
	for _, g := range s.GradAccumulations {
		grads = append(grads, fmt.Sprintf("%d %s %s", g.Elements, g.DType, s.Threads[g.Thread].TID))
	}
	if diff := cmp.Diff([]string{"2048 float 200", "32 float 200", "2048 float 200", "32 float 200"}, grads); diff != "" {
		t.Errorf("grad accumulations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"oom"}, diagKinds(s)); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
	if strings.Contains(fmt.Sprintf("%+v", *s), "never-echo-me") {
		t.Errorf("the value of an unknown top-level key is in the snapshot")
	}
}
