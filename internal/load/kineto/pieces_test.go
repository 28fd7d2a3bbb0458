package kineto

import (
	"cmp"
	"slices"
	"testing"
)

// TestPieceList: values added across pieces come back in order, and every
// piece after the first is made at its full size (never grown by copying).
func TestPieceList(t *testing.T) {
	for _, n := range []int32{0, 1, pieceLen - 1, pieceLen, pieceLen + 1, 2*pieceLen + 3} {
		var l pieceList[int64]
		for i := range n {
			l.add(int64(i) * 3)
		}
		if l.len() != n {
			t.Fatalf("n %d: len %d", n, l.len())
		}
		for i := range n {
			if v := *l.at(i); v != int64(i)*3 {
				t.Fatalf("n %d: value %d is %d, want %d", n, i, v, int64(i)*3)
			}
		}
		if want := (int(n) + pieceLen - 1) / pieceLen; len(l.pieces) != want {
			t.Errorf("n %d: %d pieces, want %d", n, len(l.pieces), want)
		}
		for k := 1; k < len(l.pieces); k++ {
			if cap(l.pieces[k]) != pieceLen {
				t.Errorf("n %d: piece %d has capacity %d, want %d", n, k, cap(l.pieces[k]), pieceLen)
			}
		}
	}
}

// TestSpanOrder: the time order of a thread's spans across pieces is the
// order of sorting them all at once (by start, the longer first, then file
// order), and nil when the file order is that order already.
func TestSpanOrder(t *testing.T) {
	const n = 2*pieceLen + 100
	for _, c := range []struct {
		name   string
		start  func(i int32) int64
		sorted bool
	}{
		{"in order", func(i int32) int64 { return int64(i) * 10 }, true},
		{"reversed", func(i int32) int64 { return int64(n-i) * 10 }, false},
		{"ties and nesting", func(i int32) int64 { return int64(i/7) * 100 }, false},
		{"interleaved", func(i int32) int64 { return int64((i * 7919) % n) }, false},
	} {
		var l spanList
		var all []opSpan
		for i := range int32(n) {
			sp := opSpan{start: c.start(i), end: c.start(i) + int64(i%5)*30, seq: i + 1}
			l.add(sp)
			all = append(all, sp)
		}
		order := spanOrder(&l)
		if (order == nil) != c.sorted {
			t.Fatalf("%s: order nil %v, want %v", c.name, order == nil, c.sorted)
		}
		slices.SortFunc(all, func(x, y opSpan) int {
			if d := cmp.Compare(x.start, y.start); d != 0 {
				return d
			}
			if d := cmp.Compare(y.end, x.end); d != 0 {
				return d
			}
			return cmp.Compare(x.seq, y.seq)
		})
		for k := range int32(n) {
			i := k
			if order != nil {
				i = order[k]
			}
			if got := *l.at(i); got != all[k] {
				t.Fatalf("%s: span %d of the time order is %+v, want %+v", c.name, k, got, all[k])
			}
		}
	}
}
