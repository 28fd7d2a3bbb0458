// Package traceplot reads the HTML pages torch.cuda._memory_viz writes
// (trace_plot and segment_plot): the snapshot pickle a page embeds in
// base64, or the alloc_data JSON of older trace_plot pages, streamed and
// bounded by the page's own size.
package traceplot
