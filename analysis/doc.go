// Package analysis turns the snapshot model into a result.Result (the Go form
// of the JSON schema torchmem.analysis/v1) for every device: it builds each
// device's history (analysis/history: replay, phases, steps, sites,
// categories) and runs the passes over it — OOM post-mortem, leaks, what-if
// and suggestions. It works the same on snapshots and chrome traces.
package analysis
