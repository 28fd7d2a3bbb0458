// Package kineto reads the chrome traces PyTorch's profiler writes (Kineto,
// with profile_memory: every allocation and free as an instant event) and
// the memory-timeline exports of export_memory_timeline, into the snapshot
// model: devices, events, the operator and annotation spans, distributed
// backends. It streams the JSON through internal/load/jsonlex's sanitiser
// and never holds the file whole.
package kineto
