package snapshot

import "testing"

func TestOneLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a\nb\r\nc\td", "a b  c d"},
		{"esc\x1b[31mred", `esc\x1b[31mred`},
		{"c1 \u009b31m", `c1 \x9b31m`},
		{"del\x7f", `del\x7f`},
		{"ünïcode ✓", "ünïcode ✓"},
	} {
		if got := OneLine(c.in); got != c.want {
			t.Errorf("OneLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
