package load

// Internals the external tests read.
const (
	GzipExpansionBase  = gzipExpansionBase
	GzipExpansionRatio = gzipExpansionRatio
)
