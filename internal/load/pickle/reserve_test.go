package pickle

import (
	"bufio"
	"bytes"
	"slices"
	"testing"
	"unsafe"

	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestTraceReservedOnce: past reserveAfter entries the decoder reserves
// the trace for the rest of the input at the rate seen so far, instead of
// joining chunks at the end. Whatever the size it is told (exact, unknown,
// too small: entries denser than the rate fall back to chunks, too large:
// the spare is given back), the entries are the same, and the exact size
// saves the join: at least 80% of the trace's bytes less allocated (the
// chunks read before reserving and the reserve's 1/16 spare are the rest).
func TestTraceReservedOnce(t *testing.T) {
	var buf bytes.Buffer
	entries, err := st.WriteTraining(&buf, st.TrainingConfig{TargetBytes: 22 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if entries < 2*reserveAfter {
		t.Fatalf("%d entries: too few to reserve", entries)
	}
	data := buf.Bytes()
	read := func(size int64) ([]snapshot.Event, uint64) {
		var s *snapshot.Snapshot
		var err error
		alloc := st.HeapAllocated(func() {
			s, err = Read(bufio.NewReader(bytes.NewReader(data)), snapshot.Source{Path: "train.pickle"}, snapshot.Options{}.WithDefaults(), size)
		})
		if err != nil {
			t.Fatal(err)
		}
		ev := s.Devices[0].Events
		if spare := cap(ev) - len(ev); spare > len(ev)/8 {
			t.Errorf("size %d: %d entries in a slice of %d", size, len(ev), cap(ev))
		}
		return ev, alloc
	}
	exact, withSize := read(int64(len(data)))
	unknown, joined := read(-1)
	if len(exact) != entries || !slices.Equal(exact, unknown) {
		t.Fatalf("%d entries with the size, %d without; the generator wrote %d", len(exact), len(unknown), entries)
	}
	for _, size := range []int64{int64(len(data)) / 2, 4 * int64(len(data))} {
		if ev, _ := read(size); !slices.Equal(ev, exact) {
			t.Errorf("told %d bytes of %d: %d entries, not the same as told the size", size, len(data), len(ev))
		}
	}
	trace := uint64(entries) * uint64(unsafe.Sizeof(snapshot.Event{}))
	t.Logf("%d entries (%d bytes): reading allocates %d bytes with the size, %d without", entries, trace, withSize, joined)
	if withSize+trace*8/10 > joined {
		t.Errorf("with the size reading allocates %d bytes, without %d: less than 80%% of the trace's %d bytes saved", withSize, joined, trace)
	}
}
