package report

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestWrapText(t *testing.T) {
	cases := []struct {
		name, first, rest, s string
		width                int
		want                 []string
	}{
		{"fits", "  ", "    ", "a b c", 10, []string{"  a b c"}},
		{"breaks at spaces", "- ", "  ", "one two three four", 10, []string{"- one two", "  three", "  four"}},
		{"exact width", "", "", "abcde fghij", 5, []string{"abcde", "fghij"}},
		{"runes count once", "", "", "→→→ ééé", 7, []string{"→→→ ééé"}},
		{"a long word is cut", "> ", "  ", "abcdefghijkl", 6, []string{"> abcd", "  efgh", "  ijkl"}},
		{"spaces collapse", "", "", "  a   b  ", 10, []string{"a b"}},
		{"empty", "x ", "", "", 10, []string{"x "}},
		{"a count keeps its word", "", "", "175 free_requested, 6 segment_unmap, 1 oom", 20, []string{"175 free_requested,", "6 segment_unmap,", "1 oom"}},
		{"a number keeps its unit", "", "", "used 124 MiB, 3 GiB) and 5 Bytes", 12, []string{"used", "124 MiB,", "3 GiB) and", "5 Bytes"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := wrapText(c.first, c.rest, c.s, c.width)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for _, l := range got {
				if utf8.RuneCountInString(l) > c.width && strings.TrimSpace(l) != "" {
					t.Errorf("line %q wider than %d", l, c.width)
				}
			}
		})
	}
}
