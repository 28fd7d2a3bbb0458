package jsonlex

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestTraceSanitizerChunks: the sanitiser keeps its string and escape state
// across reads of any size.
func TestTraceSanitizerChunks(t *testing.T) {
	in := "{\"a\\\"\x01\": [\"x\\\\\"], \"b\\\n\": \"\t\", \"c\": [[{}]]}\x02"
	want := "{\"a\\\" \": [\"x\\\\\"], \"b\\ \": \" \", \"c\": [[{}]]}\x02"
	for _, r := range []io.Reader{strings.NewReader(in), iotest.OneByteReader(strings.NewReader(in)), iotest.HalfReader(strings.NewReader(in))} {
		s := &Sanitizer{r: r}
		got, err := io.ReadAll(s)
		if err != nil || string(got) != want || s.replaced != 3 || s.depth != 0 {
			t.Errorf("got %q, %v, %d replaced, depth %d; want %q", got, err, s.replaced, s.depth, want)
		}
		s = &Sanitizer{r: iotest.OneByteReader(strings.NewReader(in)), maxDepth: 2}
		if _, err := io.ReadAll(s); err == nil || s.n != 36 {
			t.Errorf("depth 2: err %v at %d", err, s.n)
		}
	}
}
