//go:build !unix

package main

// stdoutClosed reports whether the process started with its standard output
// closed; only Unix systems tell (see stdout_unix.go).
func stdoutClosed() bool { return false }
