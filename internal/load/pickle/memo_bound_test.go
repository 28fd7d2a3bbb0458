package pickle

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestShortTextsBound: the short strings the decoder and the memo's slots
// share are kept once per text up to maxShortTexts texts, each costing at
// most shortTextBytes beside its own bytes; a text past them is a string
// of its own, kept by nothing.
func TestShortTextsBound(t *testing.T) {
	const n = MaxShortTexts + 1<<16
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = binary.LittleEndian.AppendUint64(nil, uint64(i))
	}
	var tx shortTexts
	heap := st.HeapAllocated(func() {
		for _, b := range bufs {
			if s := tx.intern(b); s != string(b) {
				t.Fatalf("interned %q as %q", b, s)
			}
		}
	})
	if tx.n != MaxShortTexts {
		t.Errorf("%d texts kept, want %d", tx.n, MaxShortTexts)
	}
	if i, ok := tx.index(string(bufs[n-1])); ok {
		t.Errorf("a text past the limit got index %d", i)
	}
	if i, ok := tx.index(string(bufs[7])); !ok || tx.at(i) != string(bufs[7]) {
		t.Errorf("text 7: index %d, %v", i, ok)
	}
	perText := float64(heap-8*n) / MaxShortTexts
	t.Logf("%d texts of 8 bytes: %.1f bytes a text kept beside its bytes", n, perText)
	if perText > ShortTextBytes {
		t.Errorf("%.1f bytes a text beside its bytes, more than %d", perText, ShortTextBytes)
	}
}

// TestMemoLimitInTrace: trace entries that would pass the memo limit are
// refused at the MEMOIZE that passes it, the same error whether the
// entry fast path is on or off (the fast path leaves such an entry to the
// opcodes instead of storing it).
func TestMemoLimitInTrace(t *testing.T) {
	var buf bytes.Buffer
	if _, err := st.WriteTraining(&buf, st.TrainingConfig{TargetBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	decode := func(fast bool, limit int) (*vm, error) {
		var m *vm
		opts := snapshot.Options{MaxMemo: limit}.WithDefaults()
		_, err := readPickleWith(bufio.NewReader(bytes.NewReader(data)), snapshot.Source{Path: "x.pickle"}, opts, int64(len(data)),
			func(v *vm) { m, v.fast.off = v, !fast })
		return m, err
	}
	m, err := decode(true, 0)
	if err != nil {
		t.Fatal(err)
	}
	entries := m.memo.len()
	for _, limit := range []int{entries / 2, entries * 3 / 4, entries * 7 / 10} {
		want := fmt.Sprintf("MEMOIZE of memo entry %d: more than %d memo entries", limit, limit)
		var errs [2]string
		for k, fast := range []bool{true, false} {
			m, err := decode(fast, limit)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("limit %d of %d, fast path %v: error %v, want one with %q", limit, entries, fast, err, want)
			}
			errs[k] = err.Error()
			if m.memo.len() > limit {
				t.Errorf("limit %d, fast path %v: %d memo entries", limit, fast, m.memo.len())
			}
			if fast && m.fast.entries == 0 {
				t.Errorf("limit %d: the fast path took no entry", limit)
			}
		}
		if errs[0] != errs[1] {
			t.Errorf("limit %d: the fast path fails with\n%s\nthe opcodes one by one with\n%s", limit, errs[0], errs[1])
		}
	}
}
