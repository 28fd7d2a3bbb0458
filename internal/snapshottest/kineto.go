package snapshottest

import (
	"fmt"
	"strings"
)

// ChromeTrace writes what torch.profiler (profile_memory=True) records of
// device d's simulated run as a Kineto chrome trace: a [memory] event per
// allocation and per free, whose Bytes is the allocator's block (the
// caching allocator reports block->size to the profiler, where the
// snapshot's trace records the request), with Total Allocated and Total
// Reserved after it. It is how tests check that a snapshot and a trace of
// one run give the same figures.
func ChromeTrace(s *Sim, d int) []byte {
	dv := s.dev(d)
	var ev []string
	var reserved int64
	prev := int64(0)
	for i, e := range dv.trace {
		get := func(k string) any {
			for j, key := range e.Keys {
				if key == k {
					return e.Vals[j]
				}
			}
			return nil
		}
		action, _ := get("action").(string)
		size, _ := get("size").(int64)
		ts, _ := get("time_us").(int64)
		addr, _ := get("addr").(uint64)
		alloc := dv.allocAfter[i]
		switch action {
		case "segment_alloc", "segment_map":
			reserved += size
		case "segment_free", "segment_unmap":
			reserved -= size
		case "alloc", "free_requested":
			ev = append(ev, fmt.Sprintf(`{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": %d, "args": {"Total Reserved": %d, "Total Allocated": %d, "Bytes": %d, "Addr": %d, "Device Id": %d, "Device Type": 1}}`,
				ts, reserved, alloc, alloc-prev, addr, d))
		}
		prev = alloc
	}
	var b strings.Builder
	b.WriteString(`{"schemaVersion": 1, "profile_memory": 1, "traceEvents": [`)
	b.WriteString(strings.Join(ev, ",\n"))
	b.WriteString(`], "traceName": "sim.json"}`)
	return []byte(b.String())
}
