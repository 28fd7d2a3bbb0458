// Package units is how torchmem reads and prints quantities, and how it
// makes untrusted text safe to print: sizes (ParseBytes, FormatBytes: one
// grammar, K, M, G, T and KiB…TiB powers of 1024, KB…TB powers of 1000),
// counts (Count, ParseCount, Plural), durations (Duration), saturating sums
// of figures read from files (SatAdd, SatSub), and text from an input made
// one inert line (OneLine) or clipped (ClipRunes, ClipBytes). It sits below
// every other package (it imports the standard library and go-humanize
// only), so the model, the engine, the reports and the commands share one
// way of writing each quantity.
package units
