package history

import (
	"slices"

	"github.com/torchmem/torchmem/snapshot"
)

// blockIndex tells the block of each event (the one it allocates, or whose
// free it requests or completes) in two bytes an event instead of four: a
// long trace has millions of events, and the index lives through the whole
// analysis. The replay makes blocks in event order, so an event's block is
// at most as new as the last block made by the end of its window of
// blockMark events (last), and it is kept as its distance below that one.
// A block an event allocates is less than blockMark below; a block freed
// after 65,535 newer ones or more (a parameter, a state kept all run) is
// listed in far instead.
type blockIndex struct {
	// dist[i] is last[i/blockMark] − event i's block, or farDist (the
	// block is in far); 0 for an event without a block (its action tells).
	dist []uint16
	// last[k] is the last block made by the end of window k (the number
	// made − 1).
	last []int32
	// far lists the events whose blocks are farDist or more below their
	// bound, in event order.
	far []farBlock
	// pend holds the blocks of the window being filled (−1: none).
	pend [blockMark]int32
}

// farBlock is an event whose block is too far below its bound for dist.
type farBlock struct{ event, block int32 }

const (
	// blockMark is how many events share a bound in blockIndex.last.
	blockMark = 64
	// farDist marks an event whose block is listed in blockIndex.far.
	farDist = 1<<16 - 1
)

// newBlockIndex is the index of n events, to be filled in event order
// (set, seal).
func newBlockIndex(n int) *blockIndex {
	x := &blockIndex{dist: make([]uint16, n), last: make([]int32, (n+blockMark-1)/blockMark)}
	x.clearPending()
	return x
}

func (x *blockIndex) clearPending() {
	for k := range x.pend {
		x.pend[k] = -1
	}
}

// set records the block of event i, in the window not yet sealed.
func (x *blockIndex) set(i int, bi int32) { x.pend[i%blockMark] = bi }

// seal ends the window of event i, the window's last event or the last of
// all, once made blocks exist.
func (x *blockIndex) seal(i, made int) {
	k := i / blockMark
	x.last[k] = int32(made - 1)
	first := k * blockMark
	for j := first; j <= i; j++ {
		bi := x.pend[j-first]
		if bi < 0 {
			continue
		}
		if d := made - 1 - int(bi); d < farDist {
			x.dist[j] = uint16(d)
		} else {
			x.dist[j] = farDist
			x.far = append(x.far, farBlock{int32(j), bi})
		}
	}
	x.clearPending()
}

// at is the block of event i, which must have one.
func (x *blockIndex) at(i int) int32 {
	if x.dist[i] != farDist {
		return x.near(i)
	}
	return x.farAt(i)
}

// near is the block of event i when it is not in far: the block of any
// allocation (at most blockMark−1 blocks are made after it in its window).
func (x *blockIndex) near(i int) int32 { return x.last[uint(i)/blockMark] - int32(x.dist[i]) }

// farAt is the block of event i, listed in far.
func (x *blockIndex) farAt(i int) int32 {
	k, _ := slices.BinarySearchFunc(x.far, int32(i), func(f farBlock, e int32) int { return int(f.event - e) })
	return x.far[k].block
}

// hasBlock reports whether an event of this action has a block in the
// index: every allocation and every free, requested or completed.
func hasBlock(a snapshot.Action) bool {
	return a == snapshot.ActionAlloc || a == snapshot.ActionFreeRequested || a == snapshot.ActionFreeCompleted
}
