package pickle

import (
	"strings"
	"testing"
)

// TestMemoTableRoundTrip: every kind of value comes back from the memo as
// it went in, scalars and IDs stored inline in the slot, short strings by
// the index of their text (each text once, however many slots hold it).
func TestMemoTableRoundTrip(t *testing.T) {
	var m memoTable
	long := strings.Repeat("x", memoShortString+1)
	vals := []value{
		{k: kNone}, {k: kBool, n: 1}, {k: kBool}, {k: kInt, n: -1}, {k: kInt, n: 1<<55 - 1},
		{k: kInt, n: -1 << 55}, {k: kInt, n: 1 << 60}, {k: kUint, n: -1}, {k: kFrame, n: 7},
		{k: kStack, n: 9}, {k: kGone}, strVal(kStr, "alloc"), strVal(kStr, "N/A"), strVal(kStr, "N/A"),
		strVal(kStr, long),
	}
	for i, v := range vals {
		m.set(i, v)
	}
	for i, want := range vals {
		got, ok := m.get(i)
		if !ok || got.k != want.k || got.n != want.n || got.str() != want.str() {
			t.Errorf("slot %d: got %+v, want %+v", i, got, want)
		}
	}
	if inline := len(vals) - m.nobjs; inline != 12 || m.texts.n != 2 {
		t.Errorf("%d values stored inline, %d texts of short strings; want 12 (all but the two ints beyond 56 bits and the long string) and 2", inline, m.texts.n)
	}
}
