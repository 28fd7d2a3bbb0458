//go:build unix

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// stdoutClosed reports whether the process started with its standard output
// closed (torchmem analyze f >&-). The Go runtime opens /dev/null read-write
// on a closed standard descriptor before main runs, so every write would
// succeed and the run exit 0; a shell's >/dev/null opens it write-only.
func stdoutClosed() bool {
	fl, err := unix.FcntlInt(os.Stdout.Fd(), unix.F_GETFL, 0)
	if err != nil || fl&unix.O_ACCMODE != unix.O_RDWR {
		return false
	}
	var out, null unix.Stat_t
	if unix.Fstat(int(os.Stdout.Fd()), &out) != nil || unix.Stat(os.DevNull, &null) != nil {
		return false
	}
	return out.Mode&unix.S_IFMT == unix.S_IFCHR && out.Rdev == null.Rdev
}
