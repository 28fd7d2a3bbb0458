package kineto

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/internal/load/jsonlex"
)

// This file reads the top-level object of a chrome trace and its metadata:
// the traceEvents key, deviceProperties and baseTimeNanoseconds.

// readTopObject reads {"traceEvents": [...], ...}: top-level keys in file
// order (values of unknown keys are skipped unread), deviceProperties and
// baseTimeNanoseconds.
func (tr *traceReader) readTopObject() error {
	err := tr.eachMember(func(nv []byte) error {
		name := jsonlex.Unquote(nv)
		if len(tr.keys) < 1000 {
			key := name
			if len(key) > 200 {
				key = key[:200]
			}
			tr.keys = append(tr.keys, key)
		} else {
			tr.moreKeys++
		}
		switch name {
		case "traceEvents":
			k := tr.dec.PeekKind()
			valOff := tr.nextOffset()
			if k != '[' {
				if k == 0 {
					_, err := tr.dec.ReadValue()
					return tr.wrap(err)
				}
				return tr.errAt(valOff, "not a chrome trace: traceEvents is %s, not an array", jsonKindName(k))
			}
			if _, err := tr.dec.ReadToken(); err != nil {
				return tr.wrap(err)
			}
			if err := tr.readEvents("traceEvents"); err != nil {
				return err
			}
			tr.hasEvents = true
		case "deviceProperties":
			return tr.readDeviceProperties()
		case "distributedInfo":
			v, err := tr.dec.ReadValue()
			if err != nil {
				return tr.wrap(err)
			}
			tr.dist = readDistributedInfo(v)
		case "baseTimeNanoseconds":
			if k := tr.dec.PeekKind(); k == '{' || k == '[' {
				return tr.wrap(tr.dec.SkipValue())
			}
			v, err := tr.dec.ReadValue()
			if err != nil {
				return tr.wrap(err)
			}
			if n, ok := jsonlex.ParseInt(bytes.Trim(v, `"`)); ok {
				tr.baseNS, tr.hasBase = n, true
			}
		case "roctracer_version", "hip_runtime_version", "hip_driver_version":
			tr.rocm = true
			return tr.wrap(tr.dec.SkipValue())
		default:
			return tr.wrap(tr.dec.SkipValue())
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !tr.hasEvents {
		return tr.noEventsError()
	}
	return nil
}

// noEventsError explains a JSON object without traceEvents. It names how
// many keys the object has and the first few, each cut to keyEchoBytes:
// never a value, and never a whole key, since user metadata can hold
// secrets and a key may be one (a token used as a name).
func (tr *traceReader) noEventsError() error {
	has := func(k string) bool {
		for _, x := range tr.keys {
			if x == k {
				return true
			}
		}
		return false
	}
	if has("segments") || has("device_traces") {
		return tr.errAt(0, "a JSON object with segments/device_traces (a memory snapshot as JSON?), not a chrome trace: no traceEvents")
	}
	return tr.errAt(0, "not a chrome trace: the JSON object has no traceEvents (%s)", keysEcho(tr.keys, tr.moreKeys))
}

// keysEcho words the keys of an object for an error: how many, and the
// first keysEchoed of them cut to keyEchoBytes ("3 keys: "schemaVe…",
// "deviceP…", "traceNa…""); more keys than were kept count as more.
func keysEcho(keys []string, more int) string {
	n := len(keys) + more
	if n == 0 {
		return "no keys"
	}
	q := make([]string, 0, keysEchoed)
	for _, k := range keys[:min(len(keys), keysEchoed)] {
		if len(k) > keyEchoBytes {
			k = strings.ToValidUTF8(k[:keyEchoBytes], "") + "…"
		}
		q = append(q, strconv.Quote(k))
	}
	what := fmt.Sprintf("%d keys", n)
	if n == 1 {
		what = "1 key"
	}
	if n > len(q) {
		return fmt.Sprintf("%s, the first %d: %s, …", what, len(q), strings.Join(q, ", "))
	}
	return what + ": " + strings.Join(q, ", ")
}

// An error about a JSON object's keys names at most keysEchoed of them,
// each cut to keyEchoBytes (a token's prefix, not the token).
const (
	keysEchoed   = 3
	keyEchoBytes = 8
)

// readDeviceProperties keeps id, name, totalGlobalMem and computeMajor of
// each device. It reads token by token: the list is never held whole, and what is not an
// array of objects is skipped.
func (tr *traceReader) readDeviceProperties() error {
	dec := tr.dec
	if dec.PeekKind() != '[' {
		return tr.wrap(dec.SkipValue())
	}
	if _, err := dec.ReadToken(); err != nil {
		return tr.wrap(err)
	}
	for {
		switch dec.PeekKind() {
		case ']':
			_, err := dec.ReadToken()
			return tr.wrap(err)
		case '{':
		default:
			if err := dec.SkipValue(); err != nil {
				return tr.wrap(err)
			}
			continue
		}
		id, hasID := int64(0), false
		var p devProp
		err := tr.eachMember(func(key []byte) error {
			name := string(key) // the key's bytes are the decoder's: read on
			if k := dec.PeekKind(); k == '{' || k == '[' {
				return tr.wrap(dec.SkipValue())
			}
			v, err := dec.ReadValue()
			if err != nil {
				return tr.wrap(err)
			}
			switch name {
			case `"id"`:
				id, hasID = jsonlex.ParseInt(bytes.Trim(v, `"`))
			case `"name"`:
				p.name = clipName(jsonlex.Unquote(v))
			case `"totalGlobalMem"`:
				p.mem, _ = jsonlex.ParseInt(bytes.Trim(v, `"`))
			case `"computeMajor"`:
				if m, ok := jsonlex.ParseInt(bytes.Trim(v, `"`)); ok && m > 0 && m < 100 {
					p.major = int(m)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if hasID && len(tr.devProps) < 4*tr.opts.MaxDevices {
			tr.devProps[id] = p
			tr.hasDevProps = true
		}
	}
}

// clipName shortens a device name from the input to 200 bytes.
func clipName(s string) string {
	if len(s) > 200 {
		return s[:200]
	}
	return s
}
