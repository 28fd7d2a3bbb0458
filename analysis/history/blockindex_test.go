package history

import (
	"math/rand/v2"
	"testing"
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
