package snapshottest

import (
	"context"
	"time"
)

// Deadliner is what Context needs of a test: *testing.T.
type Deadliner interface {
	Deadline() (time.Time, bool)
	Cleanup(func())
}

// Context is the context a test's waits use (a browser drawing a page, a
// child process ending). It ends a little before the test binary's own
// deadline (go test -timeout), so that a hang fails the test with the
// test's message rather than a panic of the whole binary, and never
// sooner: a slow or loaded machine never fails a test for being slow.
// Without a deadline (-timeout 0) it ends only with the test.
func Context(t Deadliner) context.Context {
	var (
		ctx    context.Context
		cancel context.CancelFunc
	)
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d.Add(-contextMargin(time.Until(d))))
	} else {
		ctx, cancel = context.WithCancel(context.Background())
	}
	t.Cleanup(cancel)
	return ctx
}

// contextMargin is how long before the binary's deadline Context ends, with
// left time remaining: a twentieth of it, between 1 and 30 seconds — time to
// stop a browser or a process and report.
func contextMargin(left time.Duration) time.Duration {
	return min(max(left/20, time.Second), 30*time.Second)
}
