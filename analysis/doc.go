// Package analysis turns the snapshot model into a result.Result (the Go
// form of the JSON schema torchmem.analysis/v1) for every device, the same
// for snapshots and chrome traces: it builds each device's history
// (analysis/history: replay, phases, steps, sites, categories) and runs
// the passes over it — the OOM post-mortem and the peak's allocations
// here, leaks (analysis/leaks), suggestions (analysis/suggest) and the
// what-if (analysis/whatif) in packages of their own — and projects a run
// to another batch or sequence length (Project).
//
// The categories are not a pass of their own: they are decided from the
// replay's stack markers, phase codes and sizing rules while the history
// is built, so they live in analysis/history.
package analysis
