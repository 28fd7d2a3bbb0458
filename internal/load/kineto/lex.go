package kineto

import (
	"math"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/internal/load/jsonlex"
	"github.com/torchmem/torchmem/snapshot"
)

// This file holds the byte-level helpers of the chrome trace reader:
// lenient number parsing and small scans of raw values (the sanitiser that
// bounds the JSON text is in package jsonlex).

// parseTimeNS parses a timestamp or duration in microseconds, written as a
// JSON integer, a decimal fraction or a string holding either, into integer
// nanoseconds without going through float64 (a float64 resolves only about
// 0.25 µs at epoch microseconds). Digits beyond nanoseconds are rounded.
// Exponent notation falls back to float64.
func parseTimeNS(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	neg := false
	i := 0
	switch b[0] {
	case '-':
		neg = true
		i++
	case '+':
		i++
	}
	var us int64
	digits := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := int64(b[i] - '0')
		if us > (math.MaxInt64/1000-d)/10 {
			return 0, false // beyond int64 nanoseconds
		}
		us = us*10 + d
		digits++
	}
	var frac int64
	fracDigits := 0
	roundUp := false
	if i < len(b) && b[i] == '.' {
		i++
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			switch {
			case fracDigits < 3:
				frac = frac*10 + int64(b[i]-'0')
			case fracDigits == 3:
				roundUp = b[i] >= '5'
			}
			fracDigits++
			digits++
		}
		for k := fracDigits; k < 3; k++ {
			frac *= 10
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(b) {
		if b[i] != 'e' && b[i] != 'E' {
			return 0, false
		}
		f, err := strconv.ParseFloat(string(b), 64)
		if err != nil || math.IsNaN(f) || math.Abs(f*1000) >= math.MaxInt64 {
			return 0, false
		}
		return int64(math.Round(f * 1000)), true
	}
	ns := us*1000 + frac
	if roundUp {
		ns++
	}
	if neg {
		ns = -ns
	}
	return ns, true
}

// parsePyFrame turns a python_function name or a legacy "Call stack" entry
// ("path/file.py(123): func") into a Frame; other names ("nn.Module:
// ResNet_0", "<built-in method …>") become a Frame with only a Name.
func parsePyFrame(s string) snapshot.Frame {
	i := strings.Index(s, "): ")
	if i > 0 {
		j := strings.LastIndexByte(s[:i], '(')
		if j > 0 {
			if line, err := strconv.ParseInt(s[j+1:i], 10, 64); err == nil {
				return snapshot.Frame{Filename: s[:j], Line: line, Name: s[i+3:]}
			}
		}
	}
	return snapshot.Frame{Name: s}
}

// firstDims returns the element count of the first shape of an "Input Dims"
// value ([[64,3,7,7],[]] → 12,544; [[]] → 1), or −1.
func firstDims(raw []byte) int64 {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return -1
	}
	i = skipSpace(raw, i+1)
	if i >= len(raw) || raw[i] != '[' {
		return -1
	}
	i++
	prod := int64(1)
	for {
		i = skipSpace(raw, i)
		if i >= len(raw) {
			return -1
		}
		if raw[i] == ']' {
			return prod
		}
		if raw[i] == ',' {
			i++
			continue
		}
		j := i
		for j < len(raw) && raw[j] != ',' && raw[j] != ']' && raw[j] != ' ' {
			j++
		}
		d, ok := jsonlex.ParseInt(raw[i:j])
		if !ok || d < 0 {
			return -1
		}
		if d != 0 && prod > math.MaxInt64/d {
			return -1
		}
		prod *= d
		i = j
	}
}

// firstString returns the first string of a JSON array of strings
// (["float", "Scalar"] → "float"), or "".
func firstString(raw []byte) string {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return ""
	}
	i = skipSpace(raw, i+1)
	if i >= len(raw) || raw[i] != '"' {
		return ""
	}
	j := i + 1
	for j < len(raw) && raw[j] != '"' {
		if raw[j] == '\\' {
			j++
		}
		j++
	}
	if j >= len(raw) {
		return ""
	}
	return jsonlex.Unquote(raw[i : j+1])
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
