package estimate

import (
	"fmt"
	"sort"
	"strings"
)

// term is coef × the value of a named quantity (sym "" for a constant):
// one part of a formula that is both computed and printed, so that what
// the output states is what the estimate added up.
type term struct {
	coef int64
	sym  string
	val  int64
}

// expr is a sum of terms: bytes per token of a block, say.
type expr []term

// dims are the quantities an expr names, for one model: h hidden size,
// q = heads × head_dim, kv = KV heads × head_dim, f the MLP width, a the
// heads, k the KV heads, r the LoRA rank, v the vocabulary.
type dims map[string]int64

func dimsOf(a *Arch, s Setup) dims {
	return dims{"h": a.Hidden, "q": a.Heads * a.HeadDim, "kv": a.KVHeads * a.HeadDim, "f": a.FFN,
		"a": a.Heads, "k": a.KVHeads, "r": s.LoRARank, "v": a.Vocab}
}

// add appends coef × sym (sym "" for a constant).
func (e expr) add(d dims, coef int64, sym string) expr {
	if coef == 0 {
		return e
	}
	v := int64(1)
	if sym != "" {
		v = d[sym]
	}
	return append(e, term{coef, sym, v})
}

// plus appends every term of o.
func (e expr) plus(o expr) expr { return append(e, o...) }

// eval is the value of the sum.
func (e expr) eval() int64 {
	var n int64
	for _, t := range e {
		n += t.coef * t.val
	}
	return n
}

// symOrder orders the symbols of a printed sum.
var symOrder = map[string]int{"": 0, "h": 1, "q": 2, "kv": 3, "f": 4, "a": 5, "k": 6, "r": 7, "v": 8}

// String prints the sum with like terms merged: "8 + 26h + 4q + 4kv + 8f + 4a".
func (e expr) String() string {
	coef := map[string]int64{}
	for _, t := range e {
		coef[t.sym] += t.coef
	}
	syms := make([]string, 0, len(coef))
	for s, c := range coef {
		if c != 0 {
			syms = append(syms, s)
		}
	}
	sort.Slice(syms, func(i, j int) bool { return symOrder[syms[i]] < symOrder[syms[j]] })
	var parts []string
	for _, s := range syms {
		switch c := coef[s]; {
		case s == "":
			parts = append(parts, fmt.Sprint(c))
		case c == 1:
			parts = append(parts, s)
		default:
			parts = append(parts, fmt.Sprintf("%d%s", c, s))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, " + ")
}
