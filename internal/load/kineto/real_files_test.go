package kineto_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/snapshot"
)

func TestTraceResNet18GradAccumulations(t *testing.T) {
	s, err := load.Open(traceFile(t, "tracelens_resnet18_train_cpu_memory_stacks.json.gz"), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// No ProfilerStep here: group by Optimizer.step. 62 AccumulateGrad per
	// step whose first Input Dims sum to 11,689,512 elements (ResNet-18).
	prev := int64(-1 << 63)
	steps := 0
	for _, a := range s.Annotations {
		if a.Kind != snapshot.AnnotationOptStep {
			continue
		}
		steps++
		n, elems := 0, int64(0)
		for _, g := range s.GradAccumulations {
			if g.TimeNS > prev && g.TimeNS < a.StartNS {
				n++
				elems += g.Elements
				if g.DType != "c10::BFloat16" || !s.Threads[g.Thread].Autograd {
					t.Fatalf("grad accumulation %+v", g)
				}
			}
		}
		if n != 62 || elems != 11_689_512 {
			t.Errorf("step %d: %d AccumulateGrad, %d elements; want 62, 11,689,512", steps, n, elems)
		}
		prev = a.StartNS
	}
	if steps != 5 {
		t.Errorf("%d optimizer steps, want 5", steps)
	}
	// with_stack: the allocations have python frames with file and line.
	cpu := s.Device(-1)
	withPy := 0
	for _, e := range cpu.Events {
		for _, f := range s.StackOf(e.Stack) {
			if fr := s.Frames[f]; fr.Line > 0 && strings.HasSuffix(fr.Filename, ".py") {
				withPy++
				break
			}
		}
	}
	if withPy == 0 {
		t.Errorf("no CPU allocation has a python frame")
	}
	if !slices.Contains(s.Source.Keys, "with_stack") || !slices.Contains(s.Source.Keys, "profile_memory") {
		t.Errorf("keys = %v", s.Source.Keys)
	}
}

func TestTraceLegacyBytesOnly(t *testing.T) {
	s, err := load.Open(traceFile(t, "kineto_resnet50_legacy_v100.json.gz"), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The curve works from Bytes alone: net +19,267,840 B on the CPU, 0 on
	// the GPU over the window (4,110 allocs and 4,110 frees).
	for _, tc := range []struct {
		id          int
		net         int64
		allocs      int
		callStacked bool
	}{{-1, 19_267_840, 2310, true}, {0, 0, 4110, true}} {
		d := s.Device(tc.id)
		var net int64
		allocs, withCS := 0, 0
		for _, e := range d.Events {
			if e.Addr != 0 {
				t.Fatalf("device %d: address %#x in a legacy trace", tc.id, e.Addr)
			}
			if e.Action == snapshot.ActionAlloc {
				net += e.Size
				allocs++
			} else {
				net -= e.Size
			}
			for _, f := range s.StackOf(e.Stack) {
				if s.Frames[f].Line > 0 {
					withCS++
					break
				}
			}
		}
		if net != tc.net || allocs != tc.allocs {
			t.Errorf("device %d: net %d, %d allocs; want %d, %d", tc.id, net, allocs, tc.net, tc.allocs)
		}
		if withCS == 0 {
			t.Errorf("device %d: no event has a Call stack frame", tc.id)
		}
	}
	bytesOnly := 0
	for _, d := range s.Diagnostics {
		if d.Kind == "bytes_only" {
			bytesOnly++
		}
	}
	if bytesOnly != 2 {
		t.Errorf("%d bytes_only diagnostics, want 2", bytesOnly)
	}
}

func TestTraceROCmDeviceType6(t *testing.T) {
	s, err := load.Open(traceFile(t, "tracelens_rocm_norm_layers.json.gz"), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := s.Device(0)
	if d == nil || d.Kind != snapshot.DeviceROCm || d.Name != "AMD Instinct MI300X" {
		t.Fatalf("device 0 = %+v", d)
	}
	// Total Reserved changes 4 times; the window ends at 1,852,416 B allocated.
	if len(d.Reserved) != 4 {
		t.Errorf("reserved points = %v", d.Reserved)
	}
	if end, _ := replay(d, 0, 1<<62); end != 1_852_416 {
		t.Errorf("allocated at the end = %d, want 1,852,416", end)
	}
	if _, orphans, _ := pairs(d); orphans != 0 {
		t.Errorf("%d orphan frees", orphans)
	}
}

func TestTraceMemoryTimelineRaw(t *testing.T) {
	s, err := load.Open(traceFile(t, "hta_memory_timeline_categories.raw.json.gz"), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := s.Device(0)
	// Net change per category over the non-PREEXISTING rows.
	net := map[string]int64{}
	var total int64
	for _, e := range d.Events {
		sz := e.Size
		if e.Action == snapshot.ActionFreeCompleted {
			sz = -sz
		}
		net[s.Strings[e.Meta]] += sz
		total += sz
	}
	want := map[string]int64{
		"category:PARAMETER": 0, "category:OPTIMIZER_STATE": 0, "category:TEMPORARY": 0, "category:AUTOGRAD_DETAIL": 0,
		"category:ACTIVATION": 128_000, "category:GRADIENT": 107_868_160, "category:UNKNOWN": -107_996_160,
	}
	if diff := cmp.Diff(want, net); diff != "" {
		t.Errorf("net bytes per category (-want +got):\n%s", diff)
	}
	if total != 0 || d.Baseline != 332_060_904 {
		t.Errorf("net %d, baseline %d", total, d.Baseline)
	}
	if first, last := d.Events[0].TimeNS, d.Events[len(d.Events)-1].TimeNS; first != 1_696_966_047_096_061_874 || last != 1_696_966_048_083_248_105 {
		t.Errorf("times %d..%d", first, last)
	}
}
