package kineto_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/snapshot"
)

// TestTraceModelOrderAcrossThreads: the threads are swept two at a time,
// but the model's frames, stacks and strings come in the order of one sweep
// of each thread in turn (threads in order of first appearance, each in
// time order), whatever the times: thread 7 appears first in the file,
// though its events come last in time; a name is first met on thread 7 as
// an op, so its frame is the op's (the whole name), on thread 8 too, where
// the same name is a Python function's.
func TestTraceModelOrderAcrossThreads(t *testing.T) {
	js := "[" + strings.Join([]string{
		span("cpu_op", "aten::add", "7", "50", "10", ""),
		mem("55", "7", 1, 0, "4096", 512, 512),
		span("python_function", "m.py(3): g", "8", "0", "20", ""),
		span("cpu_op", "aten::mul", "8", "2", "10", ""),
		mem("5", "8", 1, 0, "8192", 100, 612),
		span("cpu_op", "m.py(3): g", "7", "70", "10", ""),
		mem("75", "7", 1, 0, "12288", 1, 613),
		span("cpu_op", "aten::add", "9", "1", "10", ""),
		mem("3", "9", 1, 0, "16384", 2, 615),
		span("cpu_op", "aten::zero_", "9", "20", "10", ""),
		mem("21", "9", 1, 0, "20480", 3, 618),
	}, ",\n") + "]"
	s := readTraceString(t, js)
	var frames []string
	for _, f := range s.Frames {
		frames = append(frames, fmt.Sprintf("%s:%d %s", f.Filename, f.Line, f.Name))
	}
	if want := []string{":0 aten::add", ":0 m.py(3): g", ":0 aten::mul", ":0 aten::zero_"}; !cmp.Equal(frames, want) {
		t.Errorf("frames %q, want %q", frames, want)
	}
	if want := [][]snapshot.FrameID{nil, {0}, {1}, {2, 1}, {3}}; !cmp.Equal(s.Stacks, want) {
		t.Errorf("stacks %v, want %v", s.Stacks, want)
	}
	if want := []string{"", "aten::add", "m.py(3): g", "aten::mul", "aten::zero_"}; !cmp.Equal(s.Strings, want) {
		t.Errorf("strings %q, want %q", s.Strings, want)
	}
	var evs []string
	for _, e := range s.Device(0).Events {
		evs = append(evs, fmt.Sprintf("%d stack %d meta %d thread %s", e.TimeNS, e.Stack, e.Meta, s.Threads[e.Thread].TID))
	}
	want := []string{"3000 stack 1 meta 1 thread 9", "5000 stack 3 meta 3 thread 8", "21000 stack 4 meta 4 thread 9",
		"55000 stack 1 meta 1 thread 7", "75000 stack 2 meta 2 thread 7"}
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
