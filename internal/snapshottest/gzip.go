package snapshottest

import (
	"bytes"
	"compress/gzip"
)

// Gzip is b compressed at gzip's best compression, as a file on disk (or a
// hostile file making the most of the expansion) would be.
func Gzip(b []byte) []byte {
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}
