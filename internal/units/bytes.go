package units

import "strconv"

// byteUnits are the binary units FormatBytes steps through.
var byteUnits = [...]string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// FormatBytes renders a byte count for people, the one way every output of
// torchmem writes sizes: whole bytes below 1 KiB ("512 B"), otherwise three
// significant digits in the largest binary unit that keeps the number at
// least 1 ("1.50 GiB", "21.7 GiB", "384 MiB"). Negative counts get a minus
// sign; every int64, math.MinInt64 included, formats.
func FormatBytes(n int64) string {
	if n < 0 {
		return "-" + formatUnsignedBytes(uint64(-(n+1))+1)
	}
	return formatUnsignedBytes(uint64(n))
}

func formatUnsignedBytes(u uint64) string {
	if u < 1024 {
		return strconv.FormatUint(u, 10) + " B"
	}
	v := float64(u)
	for i, unit := range byteUnits {
		v /= 1024
		prec := 2
		switch {
		case v >= 100:
			prec = 0
		case v >= 10:
			prec = 1
		}
		s := strconv.FormatFloat(v, 'f', prec, 64)
		// 1023.7 KiB rounds to "1024": write it in the next unit instead.
		if r, _ := strconv.ParseFloat(s, 64); r >= 1024 && i+1 < len(byteUnits) {
			continue
		}
		return s + " " + unit
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + " EiB" // not reached: 2^64 B is 16 EiB
}
