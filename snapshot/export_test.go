package snapshot

// Internals the external tests read.
const MaxRendered = maxRendered

var OpName = opName

const MaxShortTexts = maxShortTexts
const ShortTextBytes = shortTextBytes
const CutMarkerBytes = cutMarkerBytes

var CutPath = cutPath
