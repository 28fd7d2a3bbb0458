package pickle

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/torchmem/torchmem/snapshot"
)

// unmatchedFreesByMap is unmatchedFrees with a Go map, as it was written
// first: the reference the table must agree with.
func unmatchedFreesByMap(d *snapshot.Device) int {
	live := map[uint64]int{}
	n := 0
	for _, e := range d.Events {
		switch e.Action {
		case snapshot.ActionAlloc:
			live[e.Addr]++
		case snapshot.ActionFreeRequested:
			if live[e.Addr] == 0 {
				n++
				live[e.Addr] = -1
			}
		case snapshot.ActionFreeCompleted:
			switch c := live[e.Addr]; {
			case c > 1:
				live[e.Addr] = c - 1
			case c == 1, c < 0:
				delete(live, e.Addr)
			default:
				n++
			}
		}
	}
	return n
}

// TestUnmatchedFrees: the count of frees without an allocation before
// them, on a made trace (the count written by hand) and on traces of
// random allocations and frees (pairs, frees without allocations,
// allocations twice at an address, frees requested but not completed) over
// addresses a Fibonacci hash puts in few slots (multiples of 2^20 and
// 2^40, 0 and 2^64−1 among them), the table growing and losing entries:
// the table's count is the map's.
func TestUnmatchedFrees(t *testing.T) {
	ev := func(a snapshot.Action, addr uint64) snapshot.Event { return snapshot.Event{Action: a, Addr: addr} }
	hand := &snapshot.Device{Events: []snapshot.Event{
		ev(snapshot.ActionAlloc, 0), ev(snapshot.ActionFreeRequested, 0), ev(snapshot.ActionFreeCompleted, 0), // matched
		ev(snapshot.ActionFreeRequested, 512), ev(snapshot.ActionFreeCompleted, 512), // unmatched, counted once
		ev(snapshot.ActionFreeCompleted, 1024), // unmatched
		ev(snapshot.ActionAlloc, math.MaxUint64), ev(snapshot.ActionAlloc, math.MaxUint64),
		ev(snapshot.ActionFreeCompleted, math.MaxUint64), ev(snapshot.ActionFreeCompleted, math.MaxUint64),
		ev(snapshot.ActionFreeCompleted, math.MaxUint64), // the third: unmatched
	}}
	if got := unmatchedFrees(hand); got != 3 {
		t.Errorf("made trace: %d unmatched frees, want 3", got)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, spread := range []uint64{512, 1 << 20, 1 << 40, 1} {
		for _, live := range []int{10, 3000, 100_000} {
			var d snapshot.Device
			for range 200_000 {
				addr := uint64(rng.IntN(live)) * spread
				if rng.IntN(50) == 0 {
					addr = math.MaxUint64 - addr
				}
				a := []snapshot.Action{snapshot.ActionAlloc, snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted, snapshot.ActionAlloc}[rng.IntN(4)]
				d.Events = append(d.Events, ev(a, addr))
				if a == snapshot.ActionFreeRequested && rng.IntN(8) > 0 {
					d.Events = append(d.Events, ev(snapshot.ActionFreeCompleted, addr))
				}
			}
			if got, want := unmatchedFrees(&d), unmatchedFreesByMap(&d); got != want || want == 0 {
				t.Errorf("addresses %d apart, %d of them: %d unmatched frees, the map counts %d (want some)", spread, live, got, want)
			}
		}
	}
}

// TestAddrCountsDelete: after random insertions and deletions the table
// holds exactly the map's entries, each found from its home slot.
func TestAddrCountsDelete(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tab, ref := newAddrCounts(), map[uint64]int64{}
	for i := range 200_000 {
		a := uint64(rng.IntN(5000)) << 30
		j := tab.find(a)
		if v := tab.vals[j]; v != ref[a] {
			t.Fatalf("step %d: address %#x counts %d, the map %d", i, a, v, ref[a])
		}
		switch {
		case ref[a] != 0 && rng.IntN(2) == 0:
			tab.delete(j)
			delete(ref, a)
		case ref[a] == 0:
			tab.insert(j, a, int64(i%7)+1)
			ref[a] = int64(i%7) + 1
		}
	}
	if tab.n != len(ref) || len(ref) < 1000 {
		t.Errorf("table holds %d entries, the map %d (want over 1000)", tab.n, len(ref))
	}
	for a, c := range ref {
		if got := tab.get(a); got != c {
			t.Errorf("address %#x: %d, want %d", a, got, c)
		}
	}
}

// TestAddrCountsHostile: addresses chosen so that a multiplicative hash
// without a seed sends them all to one slot (k times the inverse of
// Fibonacci's multiplier) still spread over the table: no entry lies more
// than 64 slots past its home, so a file cannot make the count quadratic.
func TestAddrCountsHostile(t *testing.T) {
	const fib = 0x9E3779B97F4A7C15
	inv := uint64(fib) // Newton's iteration for the inverse modulo 2^64
	for range 6 {
		inv *= 2 - fib*inv
	}
	if inv*fib != 1 {
		t.Fatalf("inverse %#x: times the multiplier gives %#x", inv, inv*fib)
	}
	tab := newAddrCounts()
	for k := range uint64(100_000) {
		a := k * inv // a·fib = k: the top bits of every product are 0
		if j := tab.find(a); tab.vals[j] == 0 {
			tab.insert(j, a, 1)
		}
	}
	worst := 0
	mask := len(tab.keys) - 1
	for j, v := range tab.vals {
		if v != 0 {
			worst = max(worst, (j-tab.home(tab.keys[j]))&mask)
		}
	}
	if tab.n != 100_000 || worst > 64 {
		t.Errorf("%d entries, the farthest %d slots past its home: want 100000, at most 64", tab.n, worst)
	}
}
