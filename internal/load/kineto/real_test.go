package kineto_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/load/kineto"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// The facts asserted here were checked independently with python3's json
// and gzip modules on the same files (the pairing, replay and grouping
// recomputed by a throwaway script); devices, events,
// baselines, AccumulateGrad ops and PyTorch's step markers of every trace
// are what testdata/facts/trace_facts.py prints. The forward and backward
// counts of recorded/ are the programs' own: hf_scenarios.py runs 3 steps,
// torchmem record --trace profiles 3 steps of rec_train.py.

// devFact is what a test expects of one device.
type devFact struct {
	ID       int
	Kind     snapshot.DeviceKind
	Events   int
	Baseline int64
}

func traceDeviceFacts(s *snapshot.Snapshot) []devFact {
	var out []devFact
	for _, d := range s.Devices {
		out = append(out, devFact{d.ID, d.Kind, len(d.Events), d.Baseline})
	}
	return out
}

func annotationCounts(s *snapshot.Snapshot) map[snapshot.AnnotationKind]int {
	m := map[snapshot.AnnotationKind]int{}
	for _, a := range s.Annotations {
		m[a.Kind]++
	}
	return m
}

func diagKinds(s *snapshot.Snapshot) []string {
	var out []string
	for _, d := range s.Diagnostics {
		if !slices.Contains(out, d.Kind) {
			out = append(out, d.Kind)
		}
	}
	slices.Sort(out)
	return out
}

func TestTraceRealFiles(t *testing.T) {
	tests := []struct {
		file        string
		format      snapshot.Format
		generation  string
		recording   snapshot.Recording
		devices     []devFact
		annotations map[snapshot.AnnotationKind]int
		diags       []string
		grads       int
		distributed *snapshot.Distributed // distributedInfo
	}{
		{
			file: "hta_ddp_training_gpu_memory.json.gz", format: snapshot.FormatChromeTrace, generation: "2023", recording: snapshot.RecordingProfiler,
			devices:     []devFact{{-1, snapshot.DeviceCPU, 1240, 0}, {1, snapshot.DeviceCUDA, 26770, 4_096_614_400}},
			annotations: map[snapshot.AnnotationKind]int{snapshot.AnnotationStep: 5, snapshot.AnnotationOptStep: 5, snapshot.AnnotationZeroGrad: 5, snapshot.AnnotationForward: 5, snapshot.AnnotationBackward: 5, snapshot.AnnotationUser: 2020},
			grads:       2020, // 404 AccumulateGrad per step
			distributed: &snapshot.Distributed{Rank: 1, WorldSize: 2, Backend: "nccl"},
		},
		{
			file: "hta_large_integer.json.gz", format: snapshot.FormatChromeTrace, generation: "unknown", recording: snapshot.RecordingProfiler,
			annotations: map[snapshot.AnnotationKind]int{},
			diags:       []string{"no_memory_events"},
		},
		{
			file: "hta_memory_timeline_categories.raw.json.gz", format: snapshot.FormatMemoryTimeline, recording: snapshot.RecordingProfiler,
			devices:     []devFact{{0, snapshot.DeviceCUDA, 16_200, 332_060_904}}, // 16,845 rows − 645 PREEXISTING
			annotations: map[snapshot.AnnotationKind]int{},
			diags:       []string{"bytes_only", "memory_timeline"},
		},
		{
			file: "hta_rocm_minitoy_train.json.gz", format: snapshot.FormatChromeTrace, generation: "2024+", recording: snapshot.RecordingProfiler,
			annotations: map[snapshot.AnnotationKind]int{snapshot.AnnotationStep: 2, snapshot.AnnotationOptStep: 1, snapshot.AnnotationBackward: 1},
			diags:       []string{"no_memory_events"},
			grads:       2,
		},
		{
			file: "kineto_resnet50_legacy_v100.json.gz", format: snapshot.FormatChromeTrace, generation: "2021-legacy", recording: snapshot.RecordingProfilerStacks,
			devices:     []devFact{{-1, snapshot.DeviceCPU, 4618, -1}, {0, snapshot.DeviceCUDA, 8220, -1}},
			annotations: map[snapshot.AnnotationKind]int{snapshot.AnnotationStep: 6, snapshot.AnnotationOptStep: 6, snapshot.AnnotationZeroGrad: 6, snapshot.AnnotationData: 6, snapshot.AnnotationBackward: 6},
			diags:       []string{"bytes_only"},
			grads:       966,
		},
		{
			file: "tracelens_resnet18_train_cpu_memory_stacks.json.gz", format: snapshot.FormatChromeTrace, generation: "2024+", recording: snapshot.RecordingProfilerStacks,
			devices:     []devFact{{-1, snapshot.DeviceCPU, 210, 0}},
			annotations: map[snapshot.AnnotationKind]int{snapshot.AnnotationOptStep: 5, snapshot.AnnotationZeroGrad: 5, snapshot.AnnotationForward: 5, snapshot.AnnotationBackward: 5},
			grads:       310,
		},
		{
			file: "tracelens_rocm_norm_layers.json.gz", format: snapshot.FormatChromeTrace, generation: "2024+", recording: snapshot.RecordingProfilerStacks,
			devices:     []devFact{{-1, snapshot.DeviceCPU, 60, 0}, {0, snapshot.DeviceROCm, 415, 665_600}},
			annotations: map[snapshot.AnnotationKind]int{snapshot.AnnotationForward: 6, snapshot.AnnotationBackward: 3, snapshot.AnnotationUser: 30},
			grads:       27,
		},
		{
			file: "recorded/hf_llama_mixed_ckpt_train.memory_timeline.raw.json.gz", format: snapshot.FormatMemoryTimeline, recording: snapshot.RecordingProfiler,
			devices:     []devFact{{0, snapshot.DeviceCUDA, 13_944, 622_923_904}}, // 14,020 rows − 76 PREEXISTING
			annotations: map[snapshot.AnnotationKind]int{},
			diags:       []string{"bytes_only", "memory_timeline"},
		},
		{
			file: "recorded/hf_llama_mixed_ckpt_train.trace.json.gz", format: snapshot.FormatChromeTrace, generation: "2024+", recording: snapshot.RecordingProfilerStacks,
			devices:     []devFact{{-1, snapshot.DeviceCPU, 813, 0}, {0, snapshot.DeviceCUDA, 9912, 650_187_776}},
			annotations: map[snapshot.AnnotationKind]int{snapshot.AnnotationOptStep: 3, snapshot.AnnotationZeroGrad: 3, snapshot.AnnotationForward: 3, snapshot.AnnotationBackward: 3},
			grads:       225, // 75 parameters × 3 steps
		},
		{
			file: "recorded/record_trace/trace_rank0_824.json.gz", format: snapshot.FormatChromeTrace, generation: "2024+", recording: snapshot.RecordingProfilerStacks,
			devices:     []devFact{{-1, snapshot.DeviceCPU, 6, 0}, {0, snapshot.DeviceCUDA, 300, 739_525_120}},
			annotations: map[snapshot.AnnotationKind]int{snapshot.AnnotationStep: 3, snapshot.AnnotationOptStep: 3, snapshot.AnnotationZeroGrad: 3, snapshot.AnnotationForward: 3, snapshot.AnnotationBackward: 3},
			diags:       []string{"unmatched_frees"},
			grads:       21, // 7 parameters × 3 steps
		},
	}
	// Every real trace has a row (a new file in ../shared fails here).
	rows := map[string]bool{}
	for _, tc := range tests {
		rows[tc.file] = true
	}
	for _, f := range st.SharedInputs(t) {
		rel := filepath.ToSlash(f)
		for _, sub := range []string{"/traces/", "/recorded/"} {
			if i := strings.LastIndex(rel, sub); i >= 0 && strings.HasSuffix(rel, ".json.gz") {
				name := rel[i+len(sub):]
				if sub == "/recorded/" {
					name = "recorded/" + name
				}
				if !rows[name] {
					t.Errorf("no row for the trace %s: add one (testdata/facts/trace_facts.py)", name)
				}
			}
		}
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			s, err := load.Open(traceFile(t, tc.file), snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Source.Format != tc.format || s.Source.Generation != tc.generation || s.Recording != tc.recording {
				t.Errorf("format, generation, recording = %q, %q, %q; want %q, %q, %q",
					s.Source.Format, s.Source.Generation, s.Recording, tc.format, tc.generation, tc.recording)
			}
			if !s.Source.Gzipped || s.Source.Bytes <= s.Source.FileBytes {
				t.Errorf("Gzipped %v, Bytes %d, FileBytes %d", s.Source.Gzipped, s.Source.Bytes, s.Source.FileBytes)
			}
			if diff := cmp.Diff(tc.devices, traceDeviceFacts(s)); diff != "" {
				t.Errorf("devices (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.annotations, annotationCounts(s)); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.diags, diagKinds(s)); diff != "" {
				t.Errorf("diagnostic kinds (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.distributed, s.Source.Distributed); diff != "" {
				t.Errorf("distributedInfo (-want +got):\n%s", diff)
			}
			if len(s.GradAccumulations) != tc.grads {
				t.Errorf("%d grad accumulations, want %d", len(s.GradAccumulations), tc.grads)
			}
			checkTraceInvariants(t, s)
		})
	}
}

// checkTraceInvariants checks what every trace read must satisfy.
func checkTraceInvariants(t *testing.T, s *snapshot.Snapshot) {
	t.Helper()
	for _, d := range s.Devices {
		for i := range d.Events {
			e := &d.Events[i]
			if e.Size <= 0 && e.Action != snapshot.ActionOOM {
				t.Fatalf("device %d event %d: size %d", d.ID, i, e.Size)
			}
			if i > 0 && e.TimeNS < d.Events[i-1].TimeNS {
				t.Fatalf("device %d event %d: time goes back", d.ID, i)
			}
			if int(e.Stack) >= len(s.Stacks) || int(e.Thread) >= len(s.Threads) || int(e.Meta) >= len(s.Strings) {
				t.Fatalf("device %d event %d: index out of range: %+v", d.ID, i, *e)
			}
		}
	}
	for i, st := range s.Stacks {
		if len(st) > kineto.MaxTraceStack {
			t.Fatalf("stack %d has %d frames", i, len(st))
		}
		for _, f := range st {
			if int(f) >= len(s.Frames) {
				t.Fatalf("stack %d: frame %d out of range", i, f)
			}
		}
	}
	for i := 1; i < len(s.Annotations); i++ {
		a := s.Annotations[i]
		if a.StartNS < s.Annotations[i-1].StartNS || a.EndNS < a.StartNS || int(a.Thread) >= len(s.Threads) {
			t.Fatalf("annotation %d out of order or range: %+v", i, a)
		}
	}
}

// replay returns Baseline + allocs − frees after the last event at or
// before end, and the peak over the events in [start, end].
func replay(d *snapshot.Device, start, end int64) (atEnd, peak int64) {
	cur := d.Baseline
	for _, e := range d.Events {
		if e.TimeNS > end {
			break
		}
		switch e.Action {
		case snapshot.ActionAlloc:
			cur += e.Size
		case snapshot.ActionFreeCompleted:
			cur -= e.Size
		}
		if e.TimeNS >= start {
			peak = max(peak, cur)
		}
	}
	return cur, peak
}

// pairs pairs allocs and frees by address, as the analysis will.
func pairs(d *snapshot.Device) (paired, orphans, sizeMismatch int) {
	live := map[uint64]int64{}
	for _, e := range d.Events {
		switch e.Action {
		case snapshot.ActionAlloc:
			live[e.Addr] = e.Size
		case snapshot.ActionFreeCompleted:
			sz, ok := live[e.Addr]
			if !ok {
				orphans++
				continue
			}
			if sz != e.Size {
				sizeMismatch++
			}
			paired++
			delete(live, e.Addr)
		}
	}
	return
}

func TestTraceDDPFacts(t *testing.T) {
	s, err := load.Open(traceFile(t, "hta_ddp_training_gpu_memory.json.gz"), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gpu := s.Device(1)
	if gpu == nil || gpu.Kind != snapshot.DeviceCUDA || gpu.CapacityBytes != 34_089_730_048 || gpu.Name != "Tesla V100-SXM2-32GB" {
		t.Fatalf("device 1 = %+v", gpu)
	}
	// 14,005 pairs over both devices (13,385 on the GPU), no orphans, no size mismatches.
	total := 0
	for _, d := range s.Devices {
		p, o, m := pairs(d)
		if o != 0 || m != 0 {
			t.Errorf("device %d: %d orphans, %d size mismatches", d.ID, o, m)
		}
		if d.ID == 1 && p != 13_385 {
			t.Errorf("GPU pairs = %d, want 13,385", p)
		}
		total += p
	}
	if total != 14_005 {
		t.Errorf("pairs = %d, want 14,005", total)
	}
	// Reserved is constant.
	if diff := cmp.Diff([]snapshot.CounterPoint{{Event: 0, Value: 12_782_141_440}}, gpu.Reserved); diff != "" {
		t.Errorf("reserved (-want +got):\n%s", diff)
	}
	// At the end of each of ProfilerStep#2..6 the replay is back to the
	// baseline of 4,096,614,400 B, and each step peaks at 6,629,508,096 B.
	var steps []string
	for _, a := range s.Annotations {
		if a.Kind != snapshot.AnnotationStep {
			continue
		}
		steps = append(steps, a.Name)
		end, peak := replay(gpu, a.StartNS, a.EndNS)
		if end != 4_096_614_400 || peak != 6_629_508_096 {
			t.Errorf("%s: allocated at end %d, peak %d; want 4,096,614,400 and 6,629,508,096", a.Name, end, peak)
		}
	}
	if diff := cmp.Diff([]string{"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"}, steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	// ProfilerStep#2 ends at ts 1669783687384669 + dur 345770 µs.
	if got := s.Annotations[0].EndNS; got != 1_669_783_687_730_439_000 {
		t.Errorf("ProfilerStep#2 ends at %d ns", got)
	}
	// The autograd thread 785244 is told apart from the main thread 783658.
	var autograd, other []string
	for _, th := range s.Threads[1:] {
		if th.Autograd {
			autograd = append(autograd, th.TID)
		} else {
			other = append(other, th.TID)
		}
	}
	if diff := cmp.Diff([]string{"785244"}, autograd); diff != "" {
		t.Errorf("autograd threads (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"783658"}, other); diff != "" {
		t.Errorf("other threads (-want +got):\n%s", diff)
	}
	// Memory events carry their thread: 20,380 on the autograd thread.
	onAutograd := 0
	for _, d := range s.Devices {
		for _, e := range d.Events {
			if s.Threads[e.Thread].TID == "785244" {
				onAutograd++
			}
		}
	}
	if onAutograd != 20_380 {
		t.Errorf("%d memory events on the autograd thread, want 20,380", onAutograd)
	}
	// Backward ranges run on the autograd thread, one per step, inside it.
	for i, a := range s.Annotations {
		if a.Kind == snapshot.AnnotationBackward && (s.Threads[a.Thread].TID != "785244" || a.EndNS-a.StartNS < 200e6) {
			t.Errorf("annotation %d: %+v", i, a)
		}
	}
	// Every GPU event has an owning op and a stack that starts with it.
	for i, e := range gpu.Events {
		if e.Meta == 0 || e.Stack == 0 || s.Frames[s.Stacks[e.Stack][0]].Name != s.Strings[e.Meta] {
			t.Fatalf("event %d: meta %q stack %v", i, s.Strings[e.Meta], s.Stacks[e.Stack])
		}
	}
	for _, g := range s.GradAccumulations {
		if g.Elements != -1 || s.Threads[g.Thread].TID != "785244" {
			t.Fatalf("grad accumulation %+v (this trace has no shapes)", g)
		}
	}
}
