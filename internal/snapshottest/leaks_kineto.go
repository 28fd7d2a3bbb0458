package snapshottest

import (
	"fmt"
	"strings"
)

// This file writes the Kineto chrome trace of a growing_list leak.

// KinetoGrowingList writes a small Kineto chrome trace, as
// prof.export_chrome_trace writes it with profile_memory=True,
// with_stack=True and a schedule, of an inference loop of steps
// ProfilerStep#1…#steps that keeps every step's output on the GPU
// (outputs.append(model(x)) at eval.py:41). Each step runs three aten::linear
// ops inside "model.py(60): forward", each allocating an output of output
// bytes and freeing a temporary; the outputs of the first two are freed by
// the next op, the last one is never freed — growing_list at site
// "model.py:60 forward", output bytes per step. Device 0 has capacity bytes
// (deviceProperties totalGlobalMem) and baseline bytes allocated before the
// window (the model).
func KinetoGrowingList(steps int, output, capacity, baseline int64) []byte {
	var ev []string
	ts := int64(1_000_000)
	total := baseline
	addr := uint64(0x7f0000000000)
	span := func(cat, name string, start, dur int64) {
		ev = append(ev, fmt.Sprintf(`{"ph": "X", "cat": %q, "name": %q, "pid": 100, "tid": 100, "ts": %d, "dur": %d, "args": {}}`, cat, name, start, dur))
	}
	memory := func(t int64, a uint64, bytes int64) {
		total += bytes
		ev = append(ev, fmt.Sprintf(`{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 100, "tid": 100, "ts": %d, "args": {"Total Reserved": %d, "Total Allocated": %d, "Bytes": %d, "Addr": %d, "Device Id": 0, "Device Type": 1}}`,
			t, int64(1<<34), total, bytes, a))
	}
	newAddr := func() uint64 { a := addr; addr += 0x4000000; return a }
	for st := 1; st <= steps; st++ {
		start := ts
		fwd := ts + 10
		span("python_function", "eval.py(41): evaluate", fwd-5, 330)
		span("python_function", "nn.Module: Model_0", fwd-3, 320)
		span("python_function", "model.py(60): forward", fwd, 310)
		prev := uint64(0)
		for l := 0; l < 3; l++ {
			op := fwd + 5 + int64(l)*100
			span("cpu_op", "aten::linear", op, 60)
			tmp := newAddr()
			memory(op+10, tmp, output/4)
			out := newAddr()
			memory(op+20, out, output)
			memory(op+30, tmp, -output/4)
			if prev != 0 {
				memory(op+40, prev, -output)
			}
			prev = out
		}
		ts = fwd + 400
		span("user_annotation", fmt.Sprintf("ProfilerStep#%d", st), start, ts-start)
		ts += 10
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": %d}], "profile_memory": 1, "with_stack": 1, "traceEvents": [`, capacity)
	b.WriteString(strings.Join(ev, ",\n"))
	b.WriteString(`], "traceName": "growing_list.json", "displayTimeUnit": "ms"}`)
	return []byte(b.String())
}
