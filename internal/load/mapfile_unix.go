//go:build unix

package load

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the first size bytes of f read-only, or reports that it
// cannot (the caller then reads f): the decoder reads a mapped snapshot in
// place, without the read system calls' copy.
func mapFile(f *os.File, size int64) ([]byte, bool) {
	if size <= 0 || int64(int(size)) != size {
		return nil, false
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, false
	}
	return data, true
}

// unmapFile undoes mapFile.
func unmapFile(data []byte) { _ = unix.Munmap(data) }

// releaseMapped drops the pages of data from the process (they stay in the
// page cache, and a later read maps them again): the pages the decoder has
// passed no longer count in its resident memory.
func releaseMapped(data []byte) { _ = unix.Madvise(data, unix.MADV_DONTNEED) }
