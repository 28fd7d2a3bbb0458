package pickle

import "math/rand/v2"

// addrCounts maps block addresses to a small non-zero count: the blocks
// live at a point of a device's trace (unmatchedFrees). It is an open
// addressing table with linear probing and backward-shift deletion, for a
// pass over millions of events that looks each address up once or twice:
// a count of 0 marks an empty slot (a count that reaches 0 is deleted).
type addrCounts struct {
	keys  []uint64
	vals  []int64
	n     int
	shift uint   // 64 − log2(len(keys))
	seed  uint64 // mixed into the hash: a file cannot choose addresses that collide
}

func newAddrCounts() *addrCounts {
	t := &addrCounts{seed: rand.Uint64()}
	t.alloc(1 << 10)
	return t
}

func (t *addrCounts) alloc(size int) {
	t.keys, t.vals = make([]uint64, size), make([]int64, size)
	t.shift = 64
	for s := size; s > 1; s >>= 1 {
		t.shift--
	}
}

// home is the slot an address hashes to: the address and the seed mixed
// by splitmix64's finalizer, whose top bits depend on every bit of both.
func (t *addrCounts) home(a uint64) int {
	x := a ^ t.seed
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return int((x ^ x>>31) >> t.shift)
}

// find returns the slot of address a, or the empty slot where it would go.
func (t *addrCounts) find(a uint64) int {
	mask := len(t.keys) - 1
	i := t.home(a)
	for t.vals[i] != 0 && t.keys[i] != a {
		i = (i + 1) & mask
	}
	return i
}

// get is the count of address a (0 when absent).
func (t *addrCounts) get(a uint64) int64 { return t.vals[t.find(a)] }

// insert puts address a with count c (not 0) in slot i, the empty slot
// find returned for it.
func (t *addrCounts) insert(i int, a uint64, c int64) {
	t.keys[i], t.vals[i] = a, c
	t.n++
	if t.n > len(t.keys)/4*3 {
		t.grow()
	}
}

// delete empties slot i, moving back the entries after it that would
// otherwise no longer be found from their home slots.
func (t *addrCounts) delete(i int) {
	mask := len(t.keys) - 1
	for j := (i + 1) & mask; t.vals[j] != 0; j = (j + 1) & mask {
		// The entry at j stays unless its home lies cyclically outside (i, j].
		if h := t.home(t.keys[j]); (j-h)&mask >= (j-i)&mask {
			t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
			i = j
		}
	}
	t.vals[i] = 0
	t.n--
}

func (t *addrCounts) grow() {
	keys, vals := t.keys, t.vals
	t.alloc(2 * len(keys))
	for i, v := range vals {
		if v != 0 {
			j := t.find(keys[i])
			t.keys[j], t.vals[j] = keys[i], v
		}
	}
}
