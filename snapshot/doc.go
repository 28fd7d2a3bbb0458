// Package snapshot holds torchmem's one model of what a PyTorch memory
// allocator did, the options that bound a reader and the errors a bad input
// gets. The readers that fill it from the files users have — CUDA memory
// snapshots (pickles written by torch.cuda.memory._dump_snapshot, bare
// segment lists, trace_plot HTML, gzip) and Kineto chrome traces — live
// under internal/load, which finds the format of a file by its content.
//
// The model is the same for every input, so every analysis works on both.
// Readers never execute anything from the input and bound what it can make
// them allocate.
//
// # Snapshot generations
//
// A snapshot states no version: the keys present tell its generation
// (Source.Generation), and every key but a trace entry's action and size
// is optional. The generations, by the PyTorch release that added their
// distinguishing keys:
//
//	A  2.0       blocks have history, no block address or frames; trace
//	             entries action, addr, size, stream (+frames, +cpp_frames)
//	B  2.1       + segment_pool_id, is_expandable, segment frames, block
//	             address and frames, segment_map/segment_unmap; no time_us
//	C  2.2       + time_us on trace entries
//	D  2.3–2.4   + allocator_settings
//	E  2.5–2.7   + external_annotations
//	F  2.8–2.9   + compile_context on every trace entry
//	G  2.10+     + user_metadata, allocator_settings'
//	             graph_capture_record_stream_reuse
//	H  2.11+     optional pool_id, FX frame fields (fx_node_*),
//	             internal_metadata, trace_alloc_* settings
//
// The trace_plot and segment_plot HTML pages of torch.cuda._memory_viz come
// in two generations: since 2023 they embed the snapshot pickle, base64
// encoded, in a local_files array; in 2022–23 trace_plot embedded its own
// JSON (let alloc_data = {…}) and segment_plot a trace_data object (not
// read).
//
// # Chrome-trace eras
//
// A Kineto trace states no version either; these fingerprints name its era
// (Source.Generation of a trace):
//
//	2021-legacy  PyTorch ~1.9: categories Operator, Runtime, Kernel, Memcpy,
//	             Memset; [memory] events without a category, address or
//	             totals; integer absolute µs timestamps
//	2022         PyTorch 1.12–1.13: cpu_op, "Profiler Event Index", flow
//	             category async_cpu_to_gpu
//	2023         PyTorch 2.0: "Ev Idx"; [memory] events with Addr, Total
//	             Allocated and Total Reserved; fwdbwd and ac2g flows
//	2024+        baseTimeNanoseconds with relative fractional timestamps;
//	             "Record function id"
package snapshot
