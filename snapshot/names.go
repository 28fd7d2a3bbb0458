package snapshot

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxNameBytes bounds a name read from the input — a frame's function or
// file, an annotation, an operator, a metadata string: a longer one is cut
// when read, with a marker that says how much is missing, so every output
// shows the cut. Real names are at most a few KB (the longest of the real
// snapshots, a C++ frame, is 1,806 bytes); a hostile name of megabytes,
// stored once and named by every device's sites, was copied into every
// line and every analysis string that names it (a 14 KB gzip made analyze
// allocate 53 GB).
const MaxNameBytes = 4096

// cutMarkerBytes is room for the marker of a cut name: a cut name, marker
// included, is at most maxNameBytes, so cutting it again keeps it whole.
const cutMarkerBytes = 32

// CutName keeps the head of a name longer than maxNameBytes (at a
// character boundary) and says how many bytes follow:
// "aten::…[+3145728 bytes]". The kept part is a copy, so the long string is
// not held by the model.
func CutName(s string) string {
	if len(s) <= MaxNameBytes {
		return s
	}
	k := MaxNameBytes - cutMarkerBytes
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	return strings.Clone(s[:k]) + "…[+" + strconv.Itoa(len(s)-k) + " bytes]"
}

// cutPath keeps the tail of a file path longer than maxNameBytes (at a
// character boundary): its base name, and the folders the repository's
// own layout is the tail of (check --github finds the file by them), after
// a marker of what is missing: "[+1048576 bytes]…/src/model.py".
func cutPath(s string) string {
	if len(s) <= MaxNameBytes {
		return s
	}
	k := len(s) - (MaxNameBytes - cutMarkerBytes)
	for k < len(s) && !utf8.RuneStart(s[k]) {
		k++
	}
	return "[+" + strconv.Itoa(k) + " bytes]…" + strings.Clone(s[k:])
}
