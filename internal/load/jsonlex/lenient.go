package jsonlex

import (
	"bytes"
	"math"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// ParseInt parses an integer written as a JSON number or as the
// contents of a JSON string: decimal, 0x-prefixed hex, or a number with a
// zero fraction ("12.0"). Values beyond int64 report false.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	if v, ok := plainDecimal(b); ok {
		return v, true
	}
	if v, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		return v, true
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		v, err := strconv.ParseInt(s[2:], 16, 64)
		return v, err == nil
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return int64(f), true
	}
	return 0, false
}

// plainDecimal parses the common case of the numbers of a trace, an
// optional minus and at most 18 decimal digits (no overflow possible),
// without strconv's generality; anything else reports false.
func plainDecimal(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// ParseUint is ParseInt for unsigned values (addresses, ids).
func ParseUint(b []byte) (uint64, bool) {
	if v, ok := plainDecimal(b); ok && v >= 0 {
		return uint64(v), true
	}
	if v, err := strconv.ParseUint(string(b), 10, 64); err == nil {
		return v, true
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		v, err := strconv.ParseUint(s[2:], 16, 64)
		return v, err == nil
	}
	if v, ok := ParseInt(b); ok && v >= 0 {
		return uint64(v), true
	}
	return 0, false
}

// Unquote returns the text of a raw JSON string value (or the raw
// text of any other value).
func Unquote(v []byte) string {
	if len(v) >= 2 && v[0] == '"' {
		if bytes.IndexByte(v, '\\') < 0 {
			return string(v[1 : len(v)-1])
		}
		out, _ := jsontext.AppendUnquote(nil, v)
		return string(out)
	}
	return string(v)
}
