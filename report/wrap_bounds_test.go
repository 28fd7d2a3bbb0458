package report

import (
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestWrapLongWordLinear: a 4 MiB word (a frame name a hostile file can
// hold) wraps into 100-column lines with work linear in its length: the
// cut used to convert the rest of the word to runes at every line, 40,000
// lines × 4 MiB.
func TestWrapLongWordLinear(t *testing.T) {
	word := strings.Repeat("é", 2<<20) // 4 MiB, 2M columns
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	lines := wrapText("  ", "    ", "site "+word+" end", TextWidth)
	runtime.ReadMemStats(&b)
	if n := b.TotalAlloc - a.TotalAlloc; n > 64<<20 {
		t.Errorf("allocated %d bytes to wrap %d", n, len(word))
	}
	for _, l := range lines {
		if c := utf8.RuneCountInString(l); c > TextWidth {
			t.Fatalf("line of %d columns", c)
		}
	}
	if got := strings.Count(strings.Join(lines, ""), "é"); got != 2<<20 {
		t.Errorf("%d runes of the word kept, want %d", got, 2<<20)
	}
}
