package kineto

// Internals the external tests read.
const (
	MaxBackendBytes = maxBackendBytes
	MaxTraceStack   = maxTraceStack
)

// ParseTimeNS is parseTimeNS, for the external tests.
var ParseTimeNS = parseTimeNS
