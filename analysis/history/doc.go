// Package history is one device's replayed history: every block the caching
// allocator handed out with its stack's markers, the phases (forward,
// backward, optimizer, …), the training steps, the allocation sites and each
// block's category. Replay, ComputePhases and Classify build a History;
// the passes only read it.
//
// The categories are decided here rather than in a pass of their own: they
// read the replay's stack markers, phase codes and sizing rules block by
// block while the history is built, and set each block's verdict, which the
// leak, what-if and suggestion passes read back.
package history
