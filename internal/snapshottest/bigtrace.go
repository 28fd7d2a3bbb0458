package snapshottest

import (
	"bufio"
	"fmt"
	"io"
	"math/rand"
)

// WriteBigTrace streams a Kineto chrome trace of about targetBytes (plain
// JSON) to w, shaped like a profiled training loop with profile_memory,
// record_shapes and with_stack: ProfilerStep#N spans, forward ops with their
// python_function frames on the main thread, backward
// (autograd::engine::evaluate_function) on the autograd thread, an
// Optimizer.step span, and [memory] events with Addr, Bytes, Total Allocated
// and Total Reserved consistent with each other. Each step frees what it
// allocated, so memory is flat. It returns the number of [memory] events.
func WriteBigTrace(w io.Writer, targetBytes int64, seed int64) (int, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countWriter{w: bw}
	rng := rand.New(rand.NewSource(seed))
	const pid, mainTID, bwdTID = 4242, 4242, 4300
	fmt.Fprint(cw, `{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85031714816}], "profile_memory": 1, "with_stack": 1, "record_shapes": 1, "traceEvents": [`+"\n")
	ts := int64(1_754_000_000_000_000)
	baseline := int64(20 << 30)
	allocated, reserved := baseline, int64(40<<30)
	nextAddr := uint64(0x7f0000000000)
	memEvents, ev := 0, 0
	sep := func() {
		if ev > 0 {
			fmt.Fprint(cw, ",\n")
		}
		ev++
	}
	span := func(cat, name string, tid int, start, dur int64, args string) {
		sep()
		fmt.Fprintf(cw, `{"ph": "X", "cat": "%s", "name": "%s", "pid": %d, "tid": %d, "ts": %d, "dur": %d, "args": {%s}}`, cat, name, pid, tid, start, dur, args)
	}
	mem := func(tid int, t int64, addr uint64, bytes int64) {
		allocated += bytes
		sep()
		fmt.Fprintf(cw, `{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": %d, "tid": %d, "ts": %d, "args": {"Total Reserved": %d, "Total Allocated": %d, "Bytes": %d, "Device Id": 0, "Device Type": 1, "Addr": %d, "Ev Idx": %d}}`,
			pid, tid, t, reserved, allocated, bytes, addr, ev)
		memEvents++
	}
	type block struct {
		addr uint64
		size int64
	}
	ops := []string{"aten::linear", "aten::layer_norm", "aten::gelu", "aten::scaled_dot_product_attention", "aten::add", "aten::matmul"}
	for step := 1; cw.n < targetBytes; step++ {
		stepStart := ts
		var saved []block
		// Forward: one op a layer part, python frames around it.
		for l := 0; l < 48 && cw.n < targetBytes; l++ {
			op := ops[rng.Intn(len(ops))]
			start := ts
			span("python_function", fmt.Sprintf("model.py(%d): forward", 100+l%7), mainTID, start, 90, fmt.Sprintf(`"Python id": %d, "Python parent id": 1`, 1000+l))
			span("cpu_op", op, mainTID, start+5, 80, fmt.Sprintf(`"External id": %d, "Sequence number": %d, "Fwd thread id": 0, "Input Dims": [[8, 2048, 4096], [4096, 4096]], "Input type": ["c10::BFloat16", "c10::BFloat16"]`, ev, step*1000+l))
			for k := 0; k < 3; k++ {
				size := int64(512 * (1 + rng.Intn(1<<14)))
				b := block{nextAddr, size}
				nextAddr += uint64(size)
				mem(mainTID, start+10+int64(k)*10, b.addr, b.size)
				if k == 2 {
					mem(mainTID, start+60, b.addr, -b.size) // a temporary
				} else {
					saved = append(saved, b)
				}
			}
			ts += 100
		}
		span("python_function", "nn.Module: GPT_0", mainTID, stepStart, ts-stepStart, `"Python id": 1, "Python module id": 0`)
		// Backward on the autograd thread frees what forward saved.
		for i := len(saved) - 1; i >= 0; i-- {
			start := ts
			span("cpu_op", "autograd::engine::evaluate_function: MmBackward0", bwdTID, start, 40, `"Fwd thread id": 1`)
			g := block{nextAddr, saved[i].size}
			nextAddr += uint64(g.size)
			mem(bwdTID, start+5, g.addr, g.size)
			mem(bwdTID, start+20, saved[i].addr, -saved[i].size)
			mem(bwdTID, start+30, g.addr, -g.size)
			ts += 50
		}
		span("user_annotation", "Optimizer.step#AdamW.step", mainTID, ts, 500, "")
		ts += 600
		span("user_annotation", fmt.Sprintf("ProfilerStep#%d", step), mainTID, stepStart, ts-stepStart, "")
		ts += 10
	}
	fmt.Fprint(cw, "\n], \"traceName\": \"generated.pt.trace.json\"}\n")
	if cw.err != nil {
		return memEvents, cw.err
	}
	return memEvents, bw.Flush()
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}
