package kineto_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/load/kineto"
	"github.com/torchmem/torchmem/snapshot"
)

func readTraceString(t *testing.T, js string) *snapshot.Snapshot {
	t.Helper()
	s, err := load.Read(strings.NewReader(js), "synthetic.json", int64(len(js)), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkTraceInvariants(t, s)
	return s
}

// evFact is an event as the synthetic tests compare it.
type evFact struct {
	Action snapshot.Action
	Addr   uint64
	Size   int64
	TimeNS int64
	Meta   string
	Stack  []string
}

func eventFacts(s *snapshot.Snapshot, d *snapshot.Device) []evFact {
	var out []evFact
	for _, e := range d.Events {
		f := evFact{Action: e.Action, Addr: e.Addr, Size: e.Size, TimeNS: e.TimeNS, Meta: s.Strings[e.Meta]}
		for _, id := range s.StackOf(e.Stack) {
			fr := s.Frames[id]
			if fr.Filename != "" {
				f.Stack = append(f.Stack, fmt.Sprintf("%s:%d %s", fr.Filename, fr.Line, fr.Name))
			} else {
				f.Stack = append(f.Stack, fr.Name)
			}
		}
		out = append(out, f)
	}
	return out
}

func mem(ts, tid string, typ, id int, addr string, bytes, ta int64) string {
	a := ""
	if addr != "" {
		a = `"Addr": ` + addr + `, `
	}
	return fmt.Sprintf(`{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": %s, "ts": %s, "args": {%s"Device Type": %d, "Device Id": %d, "Bytes": %d, "Total Allocated": %d, "Total Reserved": 4096}}`,
		tid, ts, a, typ, id, bytes, ta)
}

func span(cat, name, tid string, ts, dur string, args string) string {
	if args == "" {
		args = "{}"
	}
	return fmt.Sprintf(`{"ph": "X", "cat": %q, "name": %q, "pid": 1, "tid": %s, "ts": %s, "dur": %s, "args": %s}`, cat, name, tid, ts, dur, args)
}

// TestTraceLenientNumbersAndOrder: a bare array; pid/tid as int or string;
// ts as int, fraction or string; unsorted events; ties kept in file order.
func TestTraceLenientNumbersAndOrder(t *testing.T) {
	js := "[" + strings.Join([]string{
		mem(`"10.5"`, `"7"`, 1, 0, "4096", -512, 1000), // the free sorts after the alloc of the same ts
		mem(`5`, `7`, 1, 0, "4096", 512, 1512),
		mem(`10.5`, `"7"`, 1, 0, "8192", 100, 1100),
		mem(`10.500`, `7`, 1, 0, "8192", -100, 1000),
		mem(`3.0005`, `7`, 1, 0, `"0x1000"`, 0, 1000), // 0 bytes: skipped
	}, ",\n") + "]"
	s := readTraceString(t, js)
	d := s.Device(0)
	want := []evFact{
		{snapshot.ActionAlloc, 4096, 512, 5000, "", nil},
		{snapshot.ActionFreeCompleted, 4096, 512, 10500, "", nil},
		{snapshot.ActionAlloc, 8192, 100, 10500, "", nil},
		{snapshot.ActionFreeCompleted, 8192, 100, 10500, "", nil},
	}
	if diff := cmp.Diff(want, eventFacts(s, d)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if d.Baseline != 1000 || len(s.Threads) != 2 || s.Threads[1].TID != "7" {
		t.Errorf("baseline %d, threads %+v", d.Baseline, s.Threads)
	}
	if diag := diagKinds(s); !cmp.Equal(diag, []string{"zero_byte_memory_events"}) {
		t.Errorf("diagnostics %v", s.Diagnostics)
	}
}

func TestTraceParseTimeNS(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1669783687464300", 1669783687464300000, true},
		{"1305516338633.34", 1305516338633340, true},
		{"1305516305192.623", 1305516305192623, true},
		{"1712195495519689.0", 1712195495519689000, true},
		{"0.30000000000000004", 300, true},
		{"0.0005", 1, true},
		{"0.0004", 0, true},
		{"-2.5", -2500, true},
		{"1e3", 1000000, true},
		{"9223372036854775", 9223372036854775000, true},
		{"9223372036854776", 0, false}, // beyond int64 ns
		{"99999999999999999999999", 0, false},
		{"", 0, false},
		{".", 0, false},
		{"abc", 0, false},
		{"12abc", 0, false},
	}
	for _, tc := range tests {
		got, ok := kineto.ParseTimeNS([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseTimeNS(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestTraceBaseTimeAndBigNumbers: baseTimeNanoseconds added exactly; args
// beyond int64 (Comms Id), an address above 2^63, a ts beyond int64 ns.
func TestTraceBaseTimeAndBigNumbers(t *testing.T) {
	js := `{"schemaVersion": 1, "baseTimeNanoseconds": 1775078550000000000, "metadata": {"HF_TOKEN": "SECRET123"}, "traceEvents": [
` + span("cpu_op", "record_param_comms", "108", "1305516338633.000", "5", `{"Comms Id": 10159970886766084423, "Fwd thread id": 0}`) + `,
` + mem("1305516338633.34", "108", 1, 0, "18446744073709551615", 512, 1024) + `,
` + mem("99999999999999999999", "108", 1, 0, "512", -512, 512) + `
], "traceName": "x"}`
	s := readTraceString(t, js)
	d := s.Device(0)
	if len(d.Events) != 1 {
		t.Fatalf("events %+v", d.Events)
	}
	e := d.Events[0]
	if e.TimeNS != 1775078550000000000+1305516338633340 || e.Addr != 1<<64-1 || s.Strings[e.Meta] != "record_param_comms" {
		t.Errorf("event %+v meta %q", e, s.Strings[e.Meta])
	}
	if diff := cmp.Diff([]string{"schemaVersion", "baseTimeNanoseconds", "metadata", "traceEvents", "traceName"}, s.Source.Keys); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	if s.Source.Generation != "2024+" {
		t.Errorf("generation %q", s.Source.Generation)
	}
	if strings.Contains(fmt.Sprintf("%+v", *s), "SECRET123") {
		t.Errorf("the snapshot holds the value of an unknown top-level key")
	}
	if diag := diagKinds(s); !cmp.Equal(diag, []string{"bad_timestamps"}) {
		t.Errorf("diagnostics %v", s.Diagnostics)
	}
}

// TestTraceControlCharacters: raw control bytes inside strings (which
// Kineto can write) are read as spaces, offsets unchanged.
func TestTraceControlCharacters(t *testing.T) {
	js := "{\"traceEvents\": [\n" +
		"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::empty\n\tx\", \"pid\": 1, \"tid\": 1, \"ts\": 10, \"dur\": 5, \"args\": {\"Call stack\": \"a.py(1): f\n;b\x01.py(2): g\"}},\n" +
		mem("12", "1", 0, -1, "64", 8, 8) + ",\n" +
		"{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": 1, \"args\": {\"name\": \"thread 1 (\x7fpy\\\"thon\x00)\"}}\n]}"
	s := readTraceString(t, js)
	want := []evFact{{snapshot.ActionAlloc, 64, 8, 12000, "aten::empty  x", []string{"aten::empty  x", "a.py:1 f", "b .py:2 g"}}}
	if diff := cmp.Diff(want, eventFacts(s, s.Device(-1))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if s.Threads[1].Name != "thread 1 (\x7fpy\"thon )" {
		t.Errorf("thread name %q", s.Threads[1].Name)
	}
	found := false
	for _, d := range s.Diagnostics {
		if d.Kind == "control_characters" && strings.HasPrefix(d.Message, "5 ") {
			found = true
		}
	}
	if !found {
		t.Errorf("diagnostics %v", s.Diagnostics)
	}
	// Invalid UTF-8 and a byte order mark are accepted too.
	s = readTraceString(t, "\xef\xbb\xbf[{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"op\xff\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1}]")
	if len(s.Threads) != 2 {
		t.Errorf("threads %v", s.Threads)
	}
}

// TestTraceStacksAndAnnotations: the stack of an allocation is its
// enclosing ops and python frames on its thread, innermost first; phases
// come from ProfilerStep, Optimizer.*, DataLoader, forward and backward
// spans; gpu_user_annotation copies are ignored.
func TestTraceStacksAndAnnotations(t *testing.T) {
	events := []string{
		span("user_annotation", "ProfilerStep#3", "1", "0", "1000", ""),
		span("gpu_user_annotation", "ProfilerStep#3", `"stream 7"`, "0", "1000", ""),
		span("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "1", "1", "9", ""),
		span("python_function", "train.py(10): main", "1", "11", "500", ""),
		span("python_function", "nn.Module: Net_0", "1", "12", "300", ""),
		span("python_function", "nn.Module: Linear_0", "1", "13", "100", ""),
		span("cpu_op", "aten::linear", "1", "20", "30", ""),
		span("cpu_op", "aten::empty", "1", "25", "0", ""), // zero duration, as in µs traces
		span("user_annotation", "Optimizer.zero_grad#SGD.zero_grad", "1", "600", "10", ""),
		span("user_annotation", "Optimizer.step#SGD.step", "1", "900", "50", ""),
		// backward on the autograd thread: two groups split by the optimizer step
		span("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", "2", "400", "50", ""),
		span("cpu_op", "AddmmBackward0", "2", "401", "40", ""),
		span("cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", "2", "452", "10", ""),
		span("cpu_op", "torch::autograd::AccumulateGrad", "2", "453", "5", `{"Input Dims": [[10, 20]], "Input type": ["float"]}`),
		span("cpu_op", "autograd::engine::evaluate_function: MulBackward0", "2", "960", "10", ""),
		mem("25", "1", 1, 0, "1024", 512, 512),  // in aten::empty
		mem("60", "1", 1, 0, "2048", 512, 1024), // in Net_0, no op: meta is the step
		mem("455", "2", 1, 0, "1024", -512, 512),
		mem("2000", "1", 1, 0, "2048", -512, 0), // outside everything
		`{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "thread 2 (python)"}}`,
	}
	s := readTraceString(t, `{"traceEvents": [`+strings.Join(events, ",\n")+`]}`)
	want := []evFact{
		{snapshot.ActionAlloc, 1024, 512, 25000, "aten::empty", []string{"aten::empty", "aten::linear", "nn.Module: Linear_0", "nn.Module: Net_0", "train.py:10 main", "ProfilerStep#3"}},
		{snapshot.ActionAlloc, 2048, 512, 60000, "ProfilerStep#3", []string{"nn.Module: Linear_0", "nn.Module: Net_0", "train.py:10 main", "ProfilerStep#3"}},
		{snapshot.ActionFreeCompleted, 1024, 512, 455000, "torch::autograd::AccumulateGrad", []string{"torch::autograd::AccumulateGrad", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"}},
		{snapshot.ActionFreeCompleted, 2048, 512, 2000000, "", nil},
	}
	if diff := cmp.Diff(want, eventFacts(s, s.Device(0))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	type ann struct {
		Kind       snapshot.AnnotationKind
		Name       string
		Start, End int64
		TID        string
	}
	var got []ann
	for _, a := range s.Annotations {
		got = append(got, ann{a.Kind, a.Name, a.StartNS / 1000, a.EndNS / 1000, s.Threads[a.Thread].TID})
	}
	wantAnns := []ann{
		{snapshot.AnnotationStep, "ProfilerStep#3", 0, 1000, "1"},
		{snapshot.AnnotationData, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1, 10, "1"},
		{snapshot.AnnotationForward, "nn.Module: Net_0", 12, 312, "1"},
		{snapshot.AnnotationBackward, "backward", 400, 462, "2"},
		{snapshot.AnnotationZeroGrad, "Optimizer.zero_grad#SGD.zero_grad", 600, 610, "1"},
		{snapshot.AnnotationOptStep, "Optimizer.step#SGD.step", 900, 950, "1"},
		{snapshot.AnnotationBackward, "backward", 960, 970, "2"},
	}
	if diff := cmp.Diff(wantAnns, got); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	threads := s.Threads[1:]
	wantThreads := []snapshot.Thread{{PID: "1", TID: "1"}, {PID: "1", TID: "2", Name: "thread 2 (python)", Autograd: true}}
	if diff := cmp.Diff(wantThreads, threads); diff != "" {
		t.Errorf("threads (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]snapshot.GradAccumulation{{TimeNS: 453000, Thread: 2, Elements: 200, DType: "float"}}, s.GradAccumulations); diff != "" {
		t.Errorf("grad accumulations (-want +got):\n%s", diff)
	}
	if s.Recording != snapshot.RecordingProfilerStacks {
		t.Errorf("recording %q", s.Recording)
	}
}

// TestTraceLegacy: a 2021 trace: Operator spans, [memory] without cat, Addr
// or totals, a Call stack on ops, *Backward ops on a second thread.
func TestTraceLegacy(t *testing.T) {
	events := []string{
		span("Operator", "ProfilerStep#5", `"25738"`, "100", "1000", ""),
		span("Operator", "aten::empty", `"25738"`, "110", "1", `{"Call stack": "model.py(54): forward;train.py(7): <module>"}`),
		span("Operator", "NllLossBackward", `"25772"`, "500", "10", ""),
		span("Operator", "AddmmBackward", `"25772"`, "520", "10", ""),
		span("Operator", "Optimizer.step#SGD.step", `"25738"`, "900", "50", ""),
		`{"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 25738, "ts": 110, "args": {"Device Type": 0, "Device Id": -1, "Bytes": 4}}`,
		`{"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 25738, "ts": 111, "args": {"Device Type": 0, "Device Id": -1, "Bytes": -4}}`,
	}
	s := readTraceString(t, `{"schemaVersion": 1, "traceEvents": [`+strings.Join(events, ",\n")+`]}`)
	want := []evFact{
		{snapshot.ActionAlloc, 0, 4, 110000, "aten::empty", []string{"aten::empty", "ProfilerStep#5", "model.py:54 forward", "train.py:7 <module>"}},
		{snapshot.ActionFreeCompleted, 0, 4, 111000, "aten::empty", []string{"aten::empty", "ProfilerStep#5", "model.py:54 forward", "train.py:7 <module>"}},
	}
	if diff := cmp.Diff(want, eventFacts(s, s.Device(-1))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if s.Source.Generation != "2021-legacy" || s.Device(-1).Baseline != -1 {
		t.Errorf("generation %q, baseline %d", s.Source.Generation, s.Device(-1).Baseline)
	}
	if diff := cmp.Diff(map[snapshot.AnnotationKind]int{snapshot.AnnotationStep: 1, snapshot.AnnotationOptStep: 1, snapshot.AnnotationBackward: 1}, annotationCounts(s)); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if diag := diagKinds(s); !cmp.Equal(diag, []string{"bytes_only"}) {
		t.Errorf("diagnostics %v", s.Diagnostics)
	}
}

// TestTraceDevicesAndOOM: device types, capacity from deviceProperties,
// Reserved changes, [OutOfMemory], unmatched frees.
func TestTraceDevicesAndOOM(t *testing.T) {
	js := `{"deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85000000000}, {"id": 1, "name": "MI300X", "totalGlobalMem": "206141652992"}],
"traceEvents": [
` + mem("1", "1", 1, 0, "1024", 512, 2560) + `,
` + mem("2", "1", 1, 0, "4096", -512, 2048) + `,
` + mem("3", "1", 12, 3, "1024", 512, 512) + `,
` + mem("4", "1", 13, 4, "1024", 512, 512) + `,
` + mem("5", "1", 6, 1, "1024", 512, 512) + `,
{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[OutOfMemory]", "pid": 1, "tid": 1, "ts": 6, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 1073741824, "Total Allocated": 2048, "Total Reserved": 8192}}
]}`
	s := readTraceString(t, js)
	var got []string
	for _, d := range s.Devices {
		got = append(got, fmt.Sprintf("%d %s %q %d ev=%d base=%d reserved=%v", d.ID, d.Kind, d.Name, d.CapacityBytes, len(d.Events), d.Baseline, d.Reserved))
	}
	want := []string{
		`0 cuda "NVIDIA H100" 85000000000 ev=3 base=2048 reserved=[{0 4096} {2 8192}]`,
		`1 rocm "MI300X" 206141652992 ev=1 base=0 reserved=[{0 4096}]`,
		`3 xpu "" 0 ev=1 base=0 reserved=[{0 4096}]`,
		`4 other "" 0 ev=1 base=0 reserved=[{0 4096}]`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
	oom := s.Device(0).Events[2]
	if oom.Action != snapshot.ActionOOM || oom.Size != 1<<30 {
		t.Errorf("oom event %+v", oom)
	}
	if diag := diagKinds(s); !cmp.Equal(diag, []string{"oom", "unknown_device_type", "unmatched_frees"}) {
		t.Errorf("diagnostics %v", s.Diagnostics)
	}
	// Device Type 1 in a ROCm trace is a ROCm GPU.
	s = readTraceString(t, `{"roctracer_version": 4, "traceEvents": [`+mem("1", "1", 1, 0, "1", 512, 512)+`]}`)
	if s.Devices[0].Kind != snapshot.DeviceROCm {
		t.Errorf("kind %q", s.Devices[0].Kind)
	}
}

// TestTraceEmpty: traces without events are valid and say so.
func TestTraceEmpty(t *testing.T) {
	for _, js := range []string{`[]`, `{"traceEvents": []}`, `{"traceEvents": [null, {}, {"ph": "X"}, {"ph": "i", "name": "[memory]"}]}`} {
		s := readTraceString(t, js)
		if len(s.Devices) != 0 || len(s.Annotations) != 0 || s.Source.Format != snapshot.FormatChromeTrace {
			t.Errorf("%s: %+v", js, s)
		}
		if kinds := diagKinds(s); !slices.Contains(kinds, "no_memory_events") {
			t.Errorf("%s: diagnostics %v", js, s.Diagnostics)
		}
	}
}
