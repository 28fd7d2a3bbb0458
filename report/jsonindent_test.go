package report

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand"
	"testing"
)

// TestIndentJSONAsEncoder: indentJSON writes the bytes json.Indent writes
// (with the json.Encoder's indent of two spaces), for values chosen to trip
// a scanner (punctuation, quotes and escapes inside strings, empty and
// nested containers, every kind of number) and for thousands of random
// ones, as json.Marshal writes them.
func TestIndentJSONAsEncoder(t *testing.T) {
	values := []any{
		nil, true, false, 0, -1, 1.5, 1e300, -2.5e-300, math.MaxInt64, "",
		"a,b:c{d}[e]", `quote " backslash \ slash /`, "\\\"", "<html> & 'x'", "tab\tnl\ncr\r\x00\x1f",
		"ünïcødé \u2028\u2029 🐍", []any{}, map[string]any{}, []any{[]any{}, map[string]any{}},
		map[string]any{"": "", "k,}": []any{1, "]", map[string]any{"x\"": nil}}},
		[]any{1, math.Copysign(0, -1), 3.25, "s", nil, true, []any{[]any{[]any{}}}},
		struct {
			A []int           `json:"a"`
			B map[string]int  `json:"b"`
			C *int            `json:"c"`
			D [0]int          `json:"d"`
			E json.RawMessage `json:"e"`
		}{A: []int{}, E: json.RawMessage(`{ "spaced" : [ 1 , 2 ] }`)},
	}
	rng := rand.New(rand.NewSource(1))
	for range 3000 {
		values = append(values, randomJSON(rng, 4))
	}
	for i, v := range values {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		got := append(indentJSON(nil, b), '\n')
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("value %d (%s): indentJSON wrote\n%s\njson.Encoder wrote\n%s", i, b, got, want.Bytes())
		}
	}
}

// randomJSON is a random value of at most depth levels of containers.
func randomJSON(rng *rand.Rand, depth int) any {
	pieces := []string{"a", "\"", "\\", ",", ":", "{", "}", "[", "]", " ", "é", "\n", "<", "&", "null", "1"}
	str := func() string {
		var s string
		for range rng.Intn(6) {
			s += pieces[rng.Intn(len(pieces))]
		}
		return s
	}
	k := rng.Intn(8)
	if depth == 0 {
		k = rng.Intn(5)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return rng.Intn(2) == 0
	case 2:
		return rng.NormFloat64() * math.Pow(10, float64(rng.Intn(60)-30))
	case 3:
		return rng.Int63() - rng.Int63()
	case 4:
		return str()
	case 5, 6:
		a := make([]any, rng.Intn(4))
		for i := range a {
			a[i] = randomJSON(rng, depth-1)
		}
		return a
	default:
		m := map[string]any{}
		for range rng.Intn(4) {
			m[str()] = randomJSON(rng, depth-1)
		}
		return m
	}
}
