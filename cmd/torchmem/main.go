// Command torchmem does the post-mortem of PyTorch GPU memory from the files a
// job leaves behind: CUDA memory snapshots and profiler chrome traces. It says
// what filled the GPU, in which phase, what leaked and what to change.
//
// Exit codes: 0 ok, 1 a check or regression failed, 2 bad input or usage,
// 3 some of the inputs of a roll-up could not be read (the others were).
package main

import (
	"errors"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, standardOutput(), os.Stderr))
}

// standardOutput is os.Stdout, or when the process started with it closed,
// a writer that fails: a command that has output to write then exits 2
// instead of 0 (one that writes nothing there, report -o FILE, succeeds).
func standardOutput() io.Writer {
	if stdoutClosed() {
		return closedWriter{}
	}
	return os.Stdout
}

// closedWriter fails every write: standard output was closed.
type closedWriter struct{}

func (closedWriter) Write([]byte) (int, error) { return 0, errStdoutClosed }

var errStdoutClosed = errors.New("standard output is closed")
