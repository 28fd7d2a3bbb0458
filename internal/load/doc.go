// Package load reads every input torchmem accepts into the snapshot model:
// Open and Read find the format by content (never by the file name),
// gunzip and bound the input, report progress, and hand the stream to one
// reader (memory snapshot pickles, trace_plot pages, Kineto chrome traces
// and memory timelines); Head and LooksLikeInput sniff a file without
// reading it all. A new format is one more reader and one more case in
// readSniffed.
package load
