// Command torchmem does the post-mortem of PyTorch GPU memory from the files a
// job leaves behind: CUDA memory snapshots and profiler chrome traces. It says
// what filled the GPU, in which phase, what leaked and what to change.
//
// Exit codes: 0 ok, 1 a check or regression failed, 2 bad input or usage.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
