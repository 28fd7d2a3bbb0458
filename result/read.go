package result

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/torchmem/torchmem/internal/units"
)

// resultSchema finds the schema id of torchmem's JSON near the start of a file.
var resultSchema = regexp.MustCompile(`"schema"\s*:\s*"(torchmem\.[a-z]+/v[0-9]+)"`)

// JSONSchema returns the torchmem schema id named near the start of a JSON
// document (e.g. torchmem.analysis/v1), or "" when it is not one of ours.
func JSONSchema(head []byte) string {
	trimmed := bytes.TrimLeft(head, " \t\r\n")
	if len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') {
		return ""
	}
	if m := resultSchema.FindSubmatch(head); m != nil {
		return string(m[1])
	}
	return ""
}

// ReadResult decodes a Result written by torchmem analyze --format json (a
// baseline): one object, or an array holding exactly one. schema is what
// JSONSchema found; more than limit bytes without whitespace (at most
// MaxResultBytes) is an error, and so are the other bounds of compactJSON
// and figures no analysis holds (checkFigures). Errors name path.
func ReadResult(r io.Reader, path, schema string, limit int64) (*Result, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s", path, units.OneLine(fmt.Sprintf(format, args...)))
	}
	if schema != SchemaID {
		return nil, bad("schema %s is not an analysis (want %s, written by torchmem analyze --format json)", schema, SchemaID)
	}
	data, err := compactJSON(r, min(limit, MaxResultBytes))
	if err != nil {
		if strings.Contains(err.Error(), "without whitespace") && limit < MaxResultBytes {
			return nil, bad("past the limit of %d bytes (raise it with --max-input-bytes)", limit)
		}
		return nil, bad("not a valid torchmem analysis: %v", err)
	}
	var res Result
	if len(data) > 0 && data[0] == '[' {
		var list []Result
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, bad("not a valid torchmem analysis: %v", err)
		}
		if len(list) != 1 {
			return nil, bad("holds %d analyses; want one (run torchmem analyze on one file)", len(list))
		}
		res = list[0]
	} else if err := json.Unmarshal(data, &res); err != nil {
		return nil, bad("not a valid torchmem analysis: %v", err)
	}
	if err := res.Validate(); err != nil {
		return nil, bad("%v", err)
	}
	res.Input.Path, res.Input.ReadBytes = path, int64(len(data))
	return &res, nil
}

// DecodeResult decodes one analysis already in memory (as torchmem merge
// reads them from a stream) within ReadResult's bounds: at most
// MaxResultBytes without whitespace and the other bounds of compactJSON,
// checked before decoding and copying nothing (a *BoundError); then
// Validate.
func DecodeResult(data []byte) (*Result, error) {
	if err := checkJSON(data, MaxResultBytes); err != nil {
		return nil, err
	}
	var res Result
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("not a valid torchmem analysis: %v", err)
	}
	if err := res.Validate(); err != nil {
		return nil, err
	}
	res.Input.ReadBytes = int64(len(data))
	return &res, nil
}

// Validate is the check every reader of a Result from JSON applies (a
// baseline, the summaries torchmem merge reads): the schema is this one,
// the result holds no more devices than a file may
// (snapshot.DefaultMaxDevices), and no byte figure is negative or beyond
// MaxFigureBytes (see CheckBounds).
func (r *Result) Validate() error {
	if r.Schema != SchemaID {
		return fmt.Errorf("schema %q: want %s", r.Schema, SchemaID)
	}
	if err := r.CheckBounds(); err != nil {
		return fmt.Errorf("not an analysis torchmem wrote: %v", err)
	}
	return nil
}

// OnlyDevice returns a shallow copy of r with only device id and its leaks.
func (r *Result) OnlyDevice(id int) *Result {
	c := *r
	c.Devices = nil
	for _, d := range r.Devices {
		if d.Device == id {
			c.Devices = append(c.Devices, d)
		}
	}
	c.Leaks = nil
	for _, l := range r.Leaks {
		if l.Device == id {
			c.Leaks = append(c.Leaks, l)
		}
	}
	return &c
}
