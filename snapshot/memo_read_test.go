package snapshot_test

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/load/pickle"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
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
		far.Write(longPut(uint32(snapshot.DefaultMaxMemo + i)))
	}
	top.WriteString("\x80\x04\x8c\x01a")
	top.Write(longPut(snapshot.DefaultMaxMemo - 1))
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
	limit := uint64(32 * snapshot.DefaultMaxMemo)
	cases := []struct {
		name    string
		data    []byte
		want    string
		maxHeap uint64
	}{
		{"8M MEMOIZE of an object", st.Gzip(memoize(snapshot.DefaultMaxMemo)), "no STOP opcode", limit + 16<<20},
		{"one MEMOIZE more", st.Gzip(memoize(snapshot.DefaultMaxMemo + 1)), "MEMOIZE of memo entry 8388608: more than 8388608 memo entries", limit + 16<<20},
		{"2M indexes past the limit", st.Gzip(far.Bytes()), "LONG_BINPUT of memo entry 8388608: more than 8388608 memo entries", 16 << 20},
		// The slots, the texts interned and every text's own bytes.
		{"4M MEMOIZE of distinct short strings", texts.Bytes(), "no STOP opcode",
			32*nTexts + pickle.ShortTextBytes*pickle.MaxShortTexts + uint64(texts.Len()) + 16<<20},
		{"the last index", st.Gzip(top.Bytes()), "memo entry 0, which was never stored", 8*snapshot.DefaultMaxMemo + 16<<20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			heap := st.HeapAllocated(func() {
				_, err = load.Read(bytes.NewReader(c.data), "memo.pickle.gz", int64(len(c.data)), snapshot.Options{})
			})
			t.Logf("%d bytes of input: %d MiB allocated", len(c.data), heap>>20)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one with %q", err, c.want)
			}
			if heap > c.maxHeap {
				t.Errorf("allocated %d bytes, more than %d (%d memo entries of at most 32 bytes, and the reader)", heap, c.maxHeap, snapshot.DefaultMaxMemo)
			}
		})
	}
}
