package jsonlex

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
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

// chunkReader reads r in pieces of sizes drawn from rng, 1 to max bytes.
type chunkReader struct {
	r   io.Reader
	rng *rand.Rand
	max int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	return c.r.Read(p[:min(len(p), 1+c.rng.Intn(c.max))])
}

// TestSanitizerBoundsWhateverTheReads: past a bound, the text passed on
// stops at the same byte and the same error follows, whatever sizes the
// reads below and above come in (a limit error used to take its whole read
// with it, so that a syntax error before it was reported or not by chance).
func TestSanitizerBoundsWhateverTheReads(t *testing.T) {
	sp := strings.Repeat(" ", LongGap+10)
	cases := []struct {
		name, in   string
		maxDepth   int
		maxString  int64
		wantOffset int64
	}{
		{"long string", `{"a": x, "b": "` + strings.Repeat("s", 100) + `"}`, 0, 40, 14},
		{"long string, escapes", `{"b": "` + strings.Repeat(`\n`, 30) + `"}`, 0, 20, 6},
		{"long number", `[1, x` + sp + strings.Repeat("7", MaxTokenBytes+5) + `]`, 0, 0, int64(5 + len(sp) + MaxTokenBytes)},
		{"too deep", `[x, [[[[[1]]]]]]`, 4, 0, 7},
		{"deep value", `{"e": [{"a": {"x": [` + strings.Repeat(`"aaaa", `, maxDeepBytes/8+10) + `"b"]}}]}`, 0, 0, 13},
		{"deep value closed past its bound", `[[[` + `[` + strings.Repeat(" ", maxDeepBytes) + `]]]]`, 0, 0, 3},
		{"deep value then long string", `[[[[` + strings.Repeat("1,", maxDeepBytes/2+10) + `"` + strings.Repeat("s", 100) + `"]]]]`, 0, 50, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var wantOut []byte
			var wantErr error
			for k := range 6 {
				var r io.Reader = strings.NewReader(tc.in)
				if k > 0 {
					r = &chunkReader{r: r, rng: rand.New(rand.NewSource(int64(k))), max: []int{1, 7, 300, 70000, 1 << 20}[k-1]}
				}
				s := NewSanitizer(r, tc.maxDepth, tc.maxString)
				var out []byte
				var err error
				buf := make([]byte, 1+k*5000)
				for err == nil {
					var n int
					n, err = s.Read(buf)
					out = append(out, buf[:n]...)
				}
				var le *LimitError
				if !errors.As(err, &le) || le.Offset != tc.wantOffset {
					t.Fatalf("reads %d: error %v, want a limit at %d", k, err, tc.wantOffset)
				}
				if k == 0 {
					wantOut, wantErr = out, err
					continue
				}
				if !bytes.Equal(out, wantOut) || err.Error() != wantErr.Error() {
					t.Fatalf("reads %d: %d bytes then %v; in one read %d bytes then %v", k, len(out), err, len(wantOut), wantErr)
				}
			}
		})
	}
}
