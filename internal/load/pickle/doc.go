// Package pickle reads the memory snapshots torch.cuda.memory._dump_snapshot
// writes (and the older segment lists of memory_snapshot()) into the
// snapshot model. It is a streaming pickle machine that knows the
// snapshot's schema: it never runs code from the file, builds no generic
// Python objects for the records, and bounds its memo, values, strings and
// nesting by what the input needs.
package pickle
