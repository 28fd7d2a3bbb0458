package units

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// sizeUnits are the suffixes ParseBytes reads, lower case. A bare K, M, G,
// T, P or E and the forms with an i (Ki, KiB, …) are powers of 1024, as
// torchmem prints sizes and as GPUs' memory is counted; KB, MB, GB, TB, PB
// and EB are powers of 1000, as disks and some vendors' sheets write them.
var sizeUnits = map[string]uint64{"": 1, "b": 1}

func init() {
	for i, p := range []string{"k", "m", "g", "t", "p", "e"} {
		bin := uint64(1) << (10 * (i + 1))
		dec := uint64(math.Pow10(3 * (i + 1)))
		sizeUnits[p], sizeUnits[p+"i"], sizeUnits[p+"ib"] = bin, bin, bin
		sizeUnits[p+"b"] = dec
	}
}

// Errors of ParseBytes; callers add the flag or key that was given.
var (
	errSize         = errors.New("want a size like 20GiB")
	errNegativeSize = errors.New("want a size like 20GiB, not a negative number")
)

// ParseBytes reads a size in bytes as every flag and config key of torchmem
// takes one: digits (with "," or "_" between groups, and a fraction), then
// optional spaces and a case-insensitive unit: none or B for bytes; K, M, G,
// T, P, E, with or without "i" or "iB", for powers of 1024 ("24G" =
// "24GiB" = 24×2³⁰); KB, MB, GB, TB, PB, EB for powers of 1000 ("80GB" =
// 80×10⁹). Whole numbers are exact; a fraction of a byte is dropped. Zero is
// read (callers that need more say so); negative numbers and sizes past the
// int64 range are errors.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "-") {
		return 0, errNegativeSize
	}
	end := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != ',' && r != '_' })
	if end < 0 {
		end = len(t)
	}
	num := strings.NewReplacer(",", "", "_", "").Replace(t[:end])
	mult, ok := sizeUnits[strings.ToLower(strings.TrimSpace(t[end:]))]
	if !ok || num == "" || num == "." || strings.Count(num, ".") > 1 {
		return 0, errSize
	}
	if !strings.Contains(num, ".") {
		v, err := strconv.ParseUint(num, 10, 64)
		hi, lo := bits.Mul64(v, mult)
		if err != nil || hi != 0 || lo > math.MaxInt64 {
			return 0, errSize
		}
		return int64(lo), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	f *= float64(mult)
	if err != nil || f >= math.MaxInt64 {
		return 0, errSize
	}
	return int64(f), nil
}

// ParseCount reads a count of things (a model's parameters): "7B", "6.7B",
// "124M", "350k", "1.2T", or plain digits ("6738415616", "6,738,415,616",
// "6_738_415_616"). Suffixes are decimal (B and G = 10⁹), as model names
// use them; the count is more than zero and at most 10¹⁵.
func ParseCount(s string) (int64, error) {
	t := strings.NewReplacer(",", "", "_", "", " ", "").Replace(strings.TrimSpace(s))
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult, t = 1e3, t[:n-1]
		case 'm', 'M':
			mult, t = 1e6, t[:n-1]
		case 'b', 'B', 'g', 'G':
			mult, t = 1e9, t[:n-1]
		case 't', 'T':
			mult, t = 1e12, t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || v <= 0 || v*mult > 1e15 {
		return 0, fmt.Errorf("%q: want a parameter count like 7B, 124M or 6738415616", s)
	}
	return int64(math.Round(v * mult)), nil
}
