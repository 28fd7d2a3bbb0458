package kineto

import (
	"bufio"

	"github.com/torchmem/torchmem/snapshot"
)

// Internals the external tests read.
const (
	MaxBackendBytes = maxBackendBytes
	MaxTraceStack   = maxTraceStack
)

// ParseTimeNS is parseTimeNS, for the external tests.
var ParseTimeNS = parseTimeNS

// ReadReference is Read with the events read by the JSON decoder alone,
// not the fast path: the reference the fast path must match byte for byte.
var ReadReference = func(in *bufio.Reader, src snapshot.Source, opts snapshot.Options) (*snapshot.Snapshot, error) {
	return read(in, src, opts, 0, false)
}
