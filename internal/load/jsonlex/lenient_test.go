package jsonlex

import "testing"

// TestLenientNumbers: the fast decimal path and the lenient fallbacks agree
// with what Kineto and the exporters write.
func TestLenientNumbers(t *testing.T) {
	tests := []struct {
		in      string
		i       int64
		iOK     bool
		u       uint64
		uOK     bool
		decimal bool // taken by plainDecimal
	}{
		{"123", 123, true, 123, true, true},
		{"-5", -5, true, 0, false, true},
		{"007", 7, true, 7, true, true},
		{"999999999999999999", 999999999999999999, true, 999999999999999999, true, true},
		{"9223372036854775807", 9223372036854775807, true, 9223372036854775807, true, false},
		{"18446744073709551615", 0, false, 18446744073709551615, true, false},
		{"0x7f", 127, true, 127, true, false},
		{" 42 ", 42, true, 42, true, false},
		{"+5", 5, true, 5, true, false},
		{"1e3", 1000, true, 1000, true, false},
		{"2.0", 2, true, 2, true, false},
		{"2.5", 0, false, 0, false, false},
		{"-", 0, false, 0, false, false},
		{"", 0, false, 0, false, false},
		{"12a", 0, false, 0, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if _, ok := plainDecimal([]byte(tc.in)); ok != tc.decimal {
				t.Errorf("plainDecimal ok = %v, want %v", ok, tc.decimal)
			}
			if i, ok := ParseInt([]byte(tc.in)); ok != tc.iOK || (ok && i != tc.i) {
				t.Errorf("parseIntLenient = %d, %v; want %d, %v", i, ok, tc.i, tc.iOK)
			}
			if u, ok := ParseUint([]byte(tc.in)); ok != tc.uOK || (ok && u != tc.u) {
				t.Errorf("parseUintLenient = %d, %v; want %d, %v", u, ok, tc.u, tc.uOK)
			}
		})
	}
}
