package kineto

import (
	"testing"
)

// TestCutEscape: the decoder's message about a bad \u escape keeps the
// escape up to its first byte that is not a hex digit, however much of it
// the decoder quoted; other messages pass unchanged.
func TestCutEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"invalid escape sequence `\\u#000` in string", "invalid escape sequence `\\u#` in string"},
		{"invalid escape sequence `\\u#` in string", "invalid escape sequence `\\u#` in string"},
		{"invalid escape sequence `\\u12g4` in string", "invalid escape sequence `\\u12g` in string"},
		{`invalid escape sequence "\\u0\xff00" in string`, `invalid escape sequence "\\u0\xff" in string`},
		{"invalid escape sequence `\\q` in string", "invalid escape sequence `\\q` in string"},
		{"invalid surrogate pair `\\ud800\\u#000` in string", "invalid surrogate pair `\\ud800\\u#000` in string"},
		{"invalid character 'x' at start of value", "invalid character 'x' at start of value"},
		{"invalid escape sequence ", "invalid escape sequence "},
		{"invalid escape sequence `\\u#00", "invalid escape sequence `\\u#00"},
	} {
		if got := cutEscape(c.in); got != c.want {
			t.Errorf("cutEscape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
