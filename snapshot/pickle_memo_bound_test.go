package snapshot

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// TestMemoBound: every memo entry counts against one limit (MaxMemo, 8M
// by default for files of this size) and costs at most memoBytesPerEntry,
// whatever indexes the pickle stores at: memoized objects one after the
// other (8M MEMOIZE of a string in an 8 KB gzip allocated 1.2 GB: the side
// table was copied as it grew), indexes far past the end (2M LONG_BINPUT
// went into a map no limit counted: 20M of them took 1.5 GB), or one index
// just below the limit (its slots are allocated), or a short string of its
// own text per entry (slots point at the decoder's texts, which are bounded
// on their own: a table of the memo's own texts took 959 MiB for 4M). The
// runtime's count of bytes allocated, not a clock.
func TestMemoBound(t *testing.T) {
	longPut := func(idx uint32) []byte {
		b := []byte{'r', 0, 0, 0, 0}
		binary.LittleEndian.PutUint32(b[1:], idx)
		return b
	}
	var far, top bytes.Buffer
	far.WriteString("\x80\x04N")
	for i := range 2 << 20 {
		far.Write(longPut(uint32(DefaultMaxMemo + i)))
	}
	top.WriteString("\x80\x04\x8c\x01a")
	top.Write(longPut(DefaultMaxMemo - 1))
	top.WriteString("h\x00") // entry 0 was never stored
	memoize := func(n int) []byte {
		return append([]byte("\x80\x04\x8c\x01a"), bytes.Repeat([]byte{0x94}, n)...)
	}
	var texts bytes.Buffer // 4M strings of 4 bytes, each its own text
	texts.WriteString("\x80\x04")
	const nTexts = 4 << 20
	for i := range uint32(nTexts) {
		texts.Write([]byte{0x8c, 4, byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24), 0x94, '0'})
	}
	limit := uint64(32 * DefaultMaxMemo)
	cases := []struct {
		name    string
		data    []byte
		want    string
		maxHeap uint64
	}{
		{"8M MEMOIZE of an object", st.Gzip(memoize(DefaultMaxMemo)), "no STOP opcode", limit + 16<<20},
		{"one MEMOIZE more", st.Gzip(memoize(DefaultMaxMemo + 1)), "MEMOIZE of memo entry 8388608: more than 8388608 memo entries", limit + 16<<20},
		{"2M indexes past the limit", st.Gzip(far.Bytes()), "LONG_BINPUT of memo entry 8388608: more than 8388608 memo entries", 16 << 20},
		// The slots, the texts interned and every text's own bytes.
		{"4M MEMOIZE of distinct short strings", texts.Bytes(), "no STOP opcode",
			32*nTexts + shortTextBytes*maxShortTexts + uint64(texts.Len()) + 16<<20},
		{"the last index", st.Gzip(top.Bytes()), "memo entry 0, which was never stored", 8*DefaultMaxMemo + 16<<20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			heap := st.HeapAllocated(func() {
				_, err = Read(bytes.NewReader(c.data), "memo.pickle.gz", int64(len(c.data)), Options{})
			})
			t.Logf("%d bytes of input: %d MiB allocated", len(c.data), heap>>20)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one with %q", err, c.want)
			}
			if heap > c.maxHeap {
				t.Errorf("allocated %d bytes, more than %d (%d memo entries of at most 32 bytes, and the reader)", heap, c.maxHeap, DefaultMaxMemo)
			}
		})
	}
}

// TestShortTextsBound: the short strings the decoder and the memo's slots
// share are kept once per text up to maxShortTexts texts, each costing at
// most shortTextBytes beside its own bytes; a text past them is a string
// of its own, kept by nothing.
func TestShortTextsBound(t *testing.T) {
	const n = maxShortTexts + 1<<16
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
	if tx.n != maxShortTexts {
		t.Errorf("%d texts kept, want %d", tx.n, maxShortTexts)
	}
	if i, ok := tx.index(string(bufs[n-1])); ok {
		t.Errorf("a text past the limit got index %d", i)
	}
	if i, ok := tx.index(string(bufs[7])); !ok || tx.at(i) != string(bufs[7]) {
		t.Errorf("text 7: index %d, %v", i, ok)
	}
	perText := float64(heap-8*n) / maxShortTexts
	t.Logf("%d texts of 8 bytes: %.1f bytes a text kept beside its bytes", n, perText)
	if perText > shortTextBytes {
		t.Errorf("%.1f bytes a text beside its bytes, more than %d", perText, shortTextBytes)
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
		opts := Options{MaxMemo: limit}.WithDefaults()
		_, err := readPickleWith(bufio.NewReader(bytes.NewReader(data)), Source{Path: "x.pickle"}, opts, int64(len(data)),
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
