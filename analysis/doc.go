// Package analysis runs torchmem's passes over the snapshot model — replay,
// phases and steps, categories, OOM post-mortem, leaks and suggestions — and
// produces a result.Result, the Go form of the JSON schema
// torchmem.analysis/v1. It works the same on snapshots and chrome traces.
package analysis
