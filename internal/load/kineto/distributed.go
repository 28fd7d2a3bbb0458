package kineto

import (
	"bytes"
	"math"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/torchmem/torchmem/internal/load/jsonlex"
	"github.com/torchmem/torchmem/snapshot"
)

// maxBackendBytes bounds the backend name kept from distributedInfo.
const maxBackendBytes = 64

// readDistributedInfo reads a chrome trace's distributedInfo object
// ({"backend": "nccl", "rank": 1, "world_size": 2, …}; newer writers add
// pg_count, pg_config and nccl_version, which are skipped). It returns nil
// when the value is not an object with a rank in 0 … math.MaxInt32, or when a
// stated world size does not hold that rank: a file that does not say
// which rank wrote it is identified some other way.
func readDistributedInfo(v jsontext.Value) *snapshot.Distributed {
	d := jsontext.NewDecoder(bytes.NewReader(v), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil
	}
	info := &snapshot.Distributed{Rank: -1}
	for d.PeekKind() == '"' {
		kv, err := d.ReadValue()
		if err != nil {
			return nil
		}
		key := string(kv) // kv is valid only until the next read
		vv, err := d.ReadValue()
		if err != nil {
			return nil
		}
		switch key {
		case `"rank"`:
			if n, ok := jsonlex.ParseInt(bytes.Trim(vv, `"`)); ok && n >= 0 && n <= math.MaxInt32 {
				info.Rank = int(n)
			}
		case `"world_size"`:
			if n, ok := jsonlex.ParseInt(bytes.Trim(vv, `"`)); ok && n > 0 && n <= math.MaxInt32 {
				info.WorldSize = int(n)
			}
		case `"backend"`:
			if len(vv) > 0 && vv[0] == '"' {
				b := jsonlex.Unquote(vv)
				if len(b) > maxBackendBytes {
					b = b[:maxBackendBytes]
				}
				info.Backend = b
			}
		}
	}
	if info.Rank < 0 || (info.WorldSize > 0 && info.Rank >= info.WorldSize) {
		return nil
	}
	return info
}
