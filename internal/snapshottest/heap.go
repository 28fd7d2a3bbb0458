package snapshottest

import "runtime"

// HeapAllocated is how many bytes f allocates on the heap: the runtime's
// count, not a clock, so the same input allocates the same on any machine
// and at any load — what tests of memory bounds assert.
func HeapAllocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}
