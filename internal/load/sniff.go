package load

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"

	"github.com/torchmem/torchmem/snapshot"
)

// HeadBytes is how much of a file Head reads: enough for the keys a chrome
// trace writes before its events, and for torchmem's own JSON schema.
const HeadBytes = 64 << 10

// Head returns up to HeadBytes of the start of the file at path,
// decompressed when the file is gzip (by content, not by name).
func Head(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &snapshot.Error{Path: path, Offset: -1, Msg: cleanOSError(err)}
	}
	defer f.Close()
	head := make([]byte, HeadBytes)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, &snapshot.Error{Path: path, Offset: -1, Msg: cleanOSError(err)}
	}
	head = head[:n]
	if len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(head))
		if err != nil {
			return nil, nil
		}
		plain, _ := io.ReadAll(io.LimitReader(zr, HeadBytes))
		return plain, nil
	}
	return head, nil
}

// LooksLikeInput judges by its start (after gzip) whether a file found in a
// folder is one torchmem reads: a pickle of protocol 2 to 5 (what
// _dump_snapshot and pickle.dump write), a chrome trace (JSON whose start
// names traceEvents, schemaVersion, deviceProperties, distributedInfo or an
// event's "ph"), a memory timeline export ([[ and a number), or a
// trace_plot page (HTML with an embedded "base64" snapshot). It is
// stricter than Read, which is given a file and tries it: a folder also
// holds logs, configs and torchmem's own JSON, which must not be taken for
// traces. Protocol 0 and 1 pickles are not recognised here.
func LooksLikeInput(head []byte) bool {
	if len(head) >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5 {
		return true
	}
	t := bytes.TrimLeft(head, " \t\r\n\ufeff\xef\xbb\xbf")
	if len(t) == 0 {
		return false
	}
	switch t[0] {
	case '{', '[':
		if bytes.Contains(head, []byte(`"schema": "torchmem.`)) || bytes.Contains(head, []byte(`"schema":"torchmem.`)) {
			return false // torchmem's own output
		}
		for _, key := range []string{`"traceEvents"`, `"schemaVersion"`, `"deviceProperties"`, `"distributedInfo"`, `"ph"`} {
			if bytes.Contains(head, []byte(key)) {
				return true
			}
		}
		rest := bytes.TrimLeft(t[1:], " \t\r\n")
		if t[0] == '[' && len(rest) > 1 && rest[0] == '[' {
			rest = bytes.TrimLeft(rest[1:], " \t\r\n")
			return len(rest) > 0 && (rest[0] == '-' || rest[0] >= '0' && rest[0] <= '9')
		}
	case '<':
		return bytes.Contains(head, []byte(`"base64"`))
	}
	return false
}
