package units

import "testing"

func TestClipAndPlural(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{ClipRunes("short", 8), "short"},
		{ClipRunes("exactly8", 8), "exactly8"},
		{ClipRunes("ünïcode-longer", 8), "ünïcode…"},
		{ClipBytes("abcdef", 6), "abcdef"},
		{ClipBytes("abcdefg", 6), "abcdef…"},
		// A byte bound may cut a rune: ü is 2 bytes, the cut keeps its first.
		{ClipBytes("aü", 2), "a\xc3…"},
		{Plural(0, "rank"), "0 ranks"},
		{Plural(1, "rank"), "1 rank"},
		{Plural(int64(12), "byte"), "12 bytes"},
		{Count(1234567), "1,234,567"},
		{Count(-1000), "-1,000"},
		{Duration(999), "999 ns"},
		{Duration(1500), "1.5 µs"},
		{Duration(2_500_000), "2.5 ms"},
		{Duration(3_210_000_000), "3.21 s"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
