package units

import "testing"

func TestOneLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a\nb\r\nc\td", "a b  c d"},
		{"esc\x1b[31mred", `esc\x1b[31mred`},
		{"c1 \u009b31m", `c1 \x9b31m`},
		{"del\x7f", `del\x7f`},
		{"ünïcode ✓", "ünïcode ✓"},
		// Raw 8-bit C1 bytes (CSI, OSC, ST) and other bytes that are not UTF-8.
		{"raw \x9b31m \x9d0;t\x9c \xff\xfe", `raw \x9b31m \x9d0;t\x9c \xff\xfe`},
		// GitHub workflow commands: "::" where a line can start, "##[" anywhere.
		{"::error::pwned", `\x3a:error::pwned`},
		{"a.py:1 f ::warning::x", `a.py:1 f \x3a:warning::x`},
		{"x\n::error::y", `x \x3a:error::y`},
		{"note ##[error]x", `note ##\x5berror]x`},
		{"c10::cuda::malloc", "c10::cuda::malloc"},
	} {
		if got := OneLine(c.in); got != c.want {
			t.Errorf("OneLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
