// Package beside runs a piece of work on a goroutine of its own, beside the
// caller's, and hands a panic of that work back to the caller. torchmem
// reports a panic (a bug) as a one-line error from the command's
// goroutine, which cannot recover the panic of another goroutine: without
// the hand-over, a bug in a pass run beside the rest would crash the
// process with a stack trace instead.
package beside

// Go runs f on a new goroutine and returns wait, which blocks until f has
// returned and then, if f panicked, panics on the caller's goroutine with
// the same value. Call wait once; what f wrote is the caller's to read
// after it returns.
func Go(f func()) (wait func()) {
	done := make(chan any, 1) // never blocks f: it ends even if wait is never called
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	return func() {
		if v := <-done; v != nil {
			panic(v)
		}
	}
}
