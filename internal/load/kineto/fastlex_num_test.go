package kineto

import (
	"math/rand"
	"regexp"
	"testing"

	"github.com/torchmem/torchmem/internal/load/jsonlex"
)

// plainInteger is the text lexInt parses.
var plainInteger = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,17})$`)

// TestLexIntSameAsLexNumber: lexInt ends where lexNumber does, on every
// input, and parses exactly the plain integers, to jsonlex.ParseInt's
// value.
func TestLexIntSameAsLexNumber(t *testing.T) {
	texts := []string{
		"0,", "-0,", "7}", "-7 ", "12", "0512,", "-0512,", "1.5,", "1e3,", "1E3,", "2.,", "-,", "--1,",
		"123456789012345678,", "-123456789012345678,", "1234567890123456789,", "-9223372036854775808,",
		"9223372036854775807,", "99999999999999999999999,", "1754000000000005,", "42949672960}",
		"1234567:90,", "1234567/90,", "12345678:,", "123456789012345?,", "1234\xb9678901,", "9999999999999999,", "-100000000,",
	}
	rng := rand.New(rand.NewSource(3))
	alphabet := "0123456789-.eE+,} x"
	for range 50000 {
		b := make([]byte, 1+rng.Intn(24))
		for k := range b {
			if k > 0 && rng.Intn(3) > 0 {
				b[k] = '0' + byte(rng.Intn(10))
			} else {
				b[k] = alphabet[rng.Intn(len(alphabet))]
			}
		}
		texts = append(texts, string(b))
	}
	for range 50000 { // runs of digits, long ones too (eight at a time), then a byte
		b := make([]byte, 1+rng.Intn(24))
		b[0] = "-123456789"[rng.Intn(10)]
		for k := 1; k < len(b); k++ {
			b[k] = '0' + byte(rng.Intn(10))
		}
		if rng.Intn(2) == 0 {
			b[rng.Intn(len(b))] = alphabet[rng.Intn(len(alphabet))]
		}
		texts = append(texts, string(b)+string(alphabet[rng.Intn(len(alphabet))]))
	}
	for _, s := range texts {
		b := []byte(s)
		if b[0] != '-' && (b[0] < '0' || b[0] > '9') {
			continue
		}
		end, v, plain := lexInt(b, 0)
		if want := lexNumber(b, 0); end != want {
			t.Fatalf("%q: end %d, lexNumber %d", s, end, want)
		}
		wantPlain := end > 0 && plainInteger.Match(b[:end])
		if plain != wantPlain {
			t.Fatalf("%q: plain %v, want %v", s, plain, wantPlain)
		}
		if plain {
			if want, ok := jsonlex.ParseInt(b[:end]); !ok || v != want {
				t.Fatalf("%q: %d, ParseInt %d %v", s, v, want, ok)
			}
		}
	}
}
