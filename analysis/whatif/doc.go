// Package whatif projects one device's measured run: its peak under each
// suggestion's technique and their cheapest combination that fits
// (Compute: result.WhatIf), and the run at another batch size or sequence
// length (Project: an estimate.Result). It splits the allocated memory of
// a replayed history into parts by how they scale (parameters, gradients,
// optimizer state, fixed, ∝ batch·seq, ∝ batch·seq², KV cache) and answers
// every question about their sums in one replay of the events.
package whatif
