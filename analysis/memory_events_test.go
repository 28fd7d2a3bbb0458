package analysis

import (
	"bytes"
	"runtime"
	"testing"
	"unsafe"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// What the analysis may cost per trace event beyond the model, on top of a
// Block per allocation (TestBytesPerEvent). Measured on the generated
// training runs: the history keeps 3.6 bytes an event (the block of each
// event in two bytes, its phase, the curves' marks every 64 events; 4.4
// while the block was four bytes), the whole analysis
// allocates 104 bytes an event in all (a third of it the blocks); before
// the what-if and the history kept no per-event curves, 43 and 278. An
// array of an int32 per event kept, or of an int64 per event made and
// dropped, passes a bound.
const (
	historyBytesPerEvent  = 6
	analysisBytesPerEvent = 108
)

// TestBytesPerEvent: the memory the analysis stage adds per trace event,
// measured by the runtime's counts (not a clock) as the difference between
// two generated training runs of 3 and 9 MB (21K and 57K events), so that
// what does not grow with the events cancels out. The history must keep at
// most historyBytesPerEvent beyond its blocks, and Analyze allocate at
// most analysisBytesPerEvent: a change that adds a per-event array to the
// analysis fails here.
func TestBytesPerEvent(t *testing.T) {
	type run struct{ events, blocks, kept, allocated float64 }
	var runs []run
	for _, size := range []int64{3 << 20, 9 << 20} {
		var buf bytes.Buffer
		if _, err := st.WriteTraining(&buf, st.TrainingConfig{TargetBytes: size}); err != nil {
			t.Fatal(err)
		}
		s, err := load.Read(bytes.NewReader(buf.Bytes()), "train.pickle", int64(buf.Len()), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		allocated := st.HeapAllocated(func() { Analyze(s, DefaultOptions()) })
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		h := history.Build(s, s.Devices[0])
		runtime.GC()
		runtime.ReadMemStats(&after)
		kept := float64(after.HeapAlloc) - float64(before.HeapAlloc)
		runs = append(runs, run{float64(len(s.Devices[0].Events)), float64(len(h.Blocks)), kept, float64(allocated)})
		runtime.KeepAlive(h)
	}
	a, b := runs[0], runs[1]
	events := b.events - a.events
	blockBytes := float64(unsafe.Sizeof(history.Block{}))
	kept := ((b.kept - b.blocks*blockBytes) - (a.kept - a.blocks*blockBytes)) / events
	allocated := (b.allocated - a.allocated) / events
	t.Logf("per event: the history keeps %.1f bytes beyond its blocks (%d bytes each, %.2f an event), Analyze allocates %.1f",
		kept, int(blockBytes), (b.blocks-a.blocks)/events, allocated)
	if kept > historyBytesPerEvent {
		t.Errorf("the history keeps %.1f bytes an event beyond its blocks, more than %d", kept, historyBytesPerEvent)
	}
	if allocated > analysisBytesPerEvent {
		t.Errorf("Analyze allocates %.1f bytes an event, more than %d", allocated, analysisBytesPerEvent)
	}
}
