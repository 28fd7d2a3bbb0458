package history

import (
	"math/rand/v2"
	"testing"

	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestBlockIndex fills the index as the replay does (blocks made in event
// order, frees of blocks made any time before) and reads every event back:
// near blocks, blocks at and past the two-byte distance, windows cut short
// by the last event, events without a block.
func TestBlockIndex(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events int
		// oldFree: the chance that a free is of one of the oldest blocks
		// (more than farDist below the bound once enough are made).
		oldFree float64
	}{
		{"empty", 0, 0},
		{"one", 1, 0},
		{"a window", blockMark, 0},
		{"a window and one", blockMark + 1, 0.5},
		{"recent frees", 300_000, 0},
		{"old frees", 300_000, 0.2},
		{"all old", 300_000, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.events), 7))
			want := make([]int32, tc.events)
			made1 := make([]bool, tc.events) // the event made its block
			x := newBlockIndex(tc.events)
			made := 0
			far := 0
			for i := range tc.events {
				if i > 0 && i%blockMark == 0 {
					x.seal(i-1, made)
				}
				want[i] = -1
				switch r := rng.Float64(); {
				case r < 0.4 || made == 0: // an allocation makes a block
					want[i] = int32(made)
					made1[i] = true
					made++
				case r < 0.8: // a free of an earlier block
					var bi int
					if rng.Float64() < tc.oldFree {
						bi = rng.IntN(max(1, made/8))
					} else {
						bi = made - 1 - rng.IntN(min(made, 1000))
					}
					want[i] = int32(bi)
					if made-1-bi >= farDist {
						far++
					}
				case r < 0.85: // a free of a block made by the free
					want[i] = int32(made)
					made1[i] = true
					made++
				default: // no block (a segment event)
				}
				if want[i] >= 0 {
					x.set(i, want[i])
				}
			}
			if tc.events > 0 {
				x.seal(tc.events-1, made)
			}
			for i, w := range want {
				if w >= 0 && x.at(i) != w {
					t.Fatalf("event %d: block %d, want %d", i, x.at(i), w)
				}
				if made1[i] && x.near(i) != w { // OpenAt's way
					t.Fatalf("event %d made block %d: near %d", i, w, x.near(i))
				}
			}
			if tc.oldFree > 0 && tc.events > 2*farDist && (far == 0 || len(x.far) < far) {
				t.Errorf("%d far blocks listed, %d expected", len(x.far), far)
			}
			if tc.oldFree == 0 && len(x.far) != 0 {
				t.Errorf("%d far blocks listed, want none", len(x.far))
			}
		})
	}
}

// TestDeltaAtOpensLessEnds: DeltaAt, which looks an event's block up once,
// is the block OpenAt opens less the one EndAt ends, at every event of
// every real file and of simulated runs, among them allocations at the
// address of a block still live (History.Reuse: the block closed there).
func TestDeltaAtOpensLessEnds(t *testing.T) {
	inputs := map[string]*snapshot.Snapshot{}
	for _, c := range []st.LeakConfig{st.DefaultLeakConfig, {Layers: 3, Hidden: 128, Tokens: 300, Vocab: 500, Steps: 5, Stacks: st.StacksCpp}} {
		inputs["train "+c.Stacks.String()] = analysistest.Read(t, st.TrainLoopHealthy(c), 0)
	}
	for _, path := range st.SharedInputs(t) {
		s, err := load.Open(path, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		inputs[path] = s
	}
	// A lost free (no real file has one): the allocation at 0x1000 while
	// the block there is live closes it; an OOM has no block.
	b := snapshot.NewBuilder(snapshot.Source{Format: snapshot.FormatSnapshotPickle})
	b.Device(0, snapshot.DeviceCUDA).Events = []snapshot.Event{
		{Action: snapshot.ActionAlloc, Addr: 0x1000, Size: 512, TimeNS: snapshot.NoTime},
		{Action: snapshot.ActionAlloc, Addr: 0x2000, Size: 256, TimeNS: snapshot.NoTime},
		{Action: snapshot.ActionAlloc, Addr: 0x1000, Size: 1024, TimeNS: snapshot.NoTime},
		{Action: snapshot.ActionOOM, Size: 4096, TimeNS: snapshot.NoTime},
		{Action: snapshot.ActionFreeRequested, Addr: 0x2000, Size: 256, TimeNS: snapshot.NoTime},
		{Action: snapshot.ActionFreeCompleted, Addr: 0x2000, Size: 256, TimeNS: snapshot.NoTime},
		{Action: snapshot.ActionFreeCompleted, Addr: 0x1000, Size: 1024, TimeNS: snapshot.NoTime},
	}
	inputs["lost free"] = b.Snap
	reuse, events := 0, 0
	for name, s := range inputs {
		for _, d := range s.Devices {
			h := Build(s, d)
			reuse += h.Reuse
			for i := range h.NumEvents() {
				var wa, wr int64
				if bi := h.OpenAt(i); bi >= 0 {
					wa, wr = h.Blocks[bi].Size, h.Blocks[bi].Requested
				}
				if bi := h.EndAt(i); bi >= 0 {
					wa -= h.Blocks[bi].Size
					wr -= h.Blocks[bi].Requested
				}
				if a, r := h.DeltaAt(i); a != wa || r != wr {
					t.Fatalf("%s device %d event %d (%v): DeltaAt %d, %d; OpenAt less EndAt %d, %d", name, d.ID, i, d.Events[i].Action, a, r, wa, wr)
				}
				events++
			}
		}
	}
	if reuse == 0 {
		t.Error("no input reuses a live address: the closing of a block by an allocation is not checked")
	}
	t.Logf("%d events, %d allocations at a live address", events, reuse)
}
