package snapshot

// Internals the external tests read.
const MaxRendered = maxRendered

var OpName = opName

const MaxShortTexts = maxShortTexts
const ShortTextBytes = shortTextBytes
const CutMarkerBytes = cutMarkerBytes

var CutName = cutName
var CutPath = cutPath

const MaxNameBytes = maxNameBytes
const MaxBackendBytes = maxBackendBytes
const MaxTraceStack = maxTraceStack

var ParseTimeNS = parseTimeNS
