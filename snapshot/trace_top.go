package snapshot

import (
	"bytes"
	"fmt"
	"strings"
)

// This file reads the top-level object of a chrome trace and its metadata:
// the traceEvents key, deviceProperties and baseTimeNanoseconds.

// readTopObject reads {"traceEvents": [...], ...}: top-level keys in file
// order (values of unknown keys are skipped unread), deviceProperties and
// baseTimeNanoseconds.
func (tr *traceReader) readTopObject() error {
	dec := tr.dec
	err := tr.eachMember(func(nv []byte) error {
		name := unquoteLenient(nv)
		if len(tr.keys) < 1000 {
			key := name
			if len(key) > 200 {
				key = key[:200]
			}
			tr.keys = append(tr.keys, key)
		}
		switch name {
		case "traceEvents":
			k := dec.PeekKind()
			valOff := tr.nextOffset()
			if k != '[' {
				if k == 0 {
					_, err := dec.ReadValue()
					return tr.wrap(err)
				}
				return tr.errAt(valOff, "not a chrome trace: traceEvents is %s, not an array", jsonKindName(k))
			}
			if _, err := dec.ReadToken(); err != nil {
				return tr.wrap(err)
			}
			if err := tr.readEvents("traceEvents"); err != nil {
				return err
			}
			tr.hasEvents = true
		case "deviceProperties":
			return tr.readDeviceProperties()
		case "distributedInfo":
			v, err := dec.ReadValue()
			if err != nil {
				return tr.wrap(err)
			}
			tr.dist = readDistributedInfo(v)
		case "baseTimeNanoseconds":
			if k := dec.PeekKind(); k == '{' || k == '[' {
				return tr.wrap(dec.SkipValue())
			}
			v, err := dec.ReadValue()
			if err != nil {
				return tr.wrap(err)
			}
			if n, ok := parseIntLenient(bytes.Trim(v, `"`)); ok {
				tr.baseNS, tr.hasBase = n, true
			}
		case "roctracer_version", "hip_runtime_version", "hip_driver_version":
			tr.rocm = true
			return tr.wrap(dec.SkipValue())
		default:
			return tr.wrap(dec.SkipValue())
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

// noEventsError explains a JSON object without traceEvents. It names at most
// a few keys (never values: user metadata can hold secrets).
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
	ks := tr.keys
	more := ""
	if len(ks) > 5 {
		ks, more = ks[:5], ", …"
	}
	q := make([]string, len(ks))
	for i, k := range ks {
		if len(k) > 40 {
			k = k[:40]
		}
		q[i] = fmt.Sprintf("%q", k)
	}
	return tr.errAt(0, "not a chrome trace: the JSON object has no traceEvents (keys: %s%s)", strings.Join(q, ", "), more)
}

// readDeviceProperties keeps id, name and totalGlobalMem of each device. It
// reads token by token: the list is never held whole, and what is not an
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
				id, hasID = parseIntLenient(bytes.Trim(v, `"`))
			case `"name"`:
				p.name = clipName(unquoteLenient(v))
			case `"totalGlobalMem"`:
				p.mem, _ = parseIntLenient(bytes.Trim(v, `"`))
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
