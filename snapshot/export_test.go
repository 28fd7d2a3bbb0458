package snapshot

// Internals the external tests read.

const CutMarkerBytes = cutMarkerBytes

var CutPath = cutPath
