package snapshot

import "bufio"

// readChromeTrace decodes a Kineto chrome trace. (Being written: issue 3.)
func readChromeTrace(in *bufio.Reader, src Source, opts Options) (*Snapshot, error) {
	return nil, &Error{Path: src.Path, Offset: 0, Msg: "chrome traces are not supported yet"}
}
