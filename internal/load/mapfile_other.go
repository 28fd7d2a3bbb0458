//go:build !unix

package load

import "os"

// mapFile reports that files are not mapped here: they are read.
func mapFile(*os.File, int64) ([]byte, bool) { return nil, false }

// unmapFile undoes mapFile.
func unmapFile([]byte) {}

// releaseMapped drops the pages of data from the process.
func releaseMapped([]byte) {}
