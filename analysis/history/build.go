package history

import (
	"runtime"
	"runtime/debug"

	"github.com/torchmem/torchmem/internal/beside"
	"github.com/torchmem/torchmem/snapshot"
)

// Build replays one device, derives its phases and steps and
// classifies its blocks: everything the analysis (and leak detection)
// starts from.
func Build(s *snapshot.Snapshot, d *snapshot.Device) *History {
	return BuildWithAnnotations(s, d, nil)
}

// BuildWithAnnotations is Build with the snapshot's annotation intervals
// shared between its devices (nil: computed for this one).
func BuildWithAnnotations(s *snapshot.Snapshot, d *snapshot.Device, ann *AnnIntervals) *History {
	return buildGuessing(s, d, ann, guessFreesCarryAllocStacks)
}

// buildGuessing is BuildWithAnnotations with the guess of whether frees
// carry their allocation's stack (tests guess wrong on purpose).
func buildGuessing(s *snapshot.Snapshot, d *snapshot.Device, ann *AnnIntervals, guess func([]snapshot.Event) bool) *History {
	// The reserved curve and the phase passes that read no block (the
	// events' hints from their frames and the annotations, resolved into
	// phases) need only the events, the segments and the stacks: they are
	// found on the other core while the events are paired into blocks.
	// The hints take frees' frames for their allocation's or not, which
	// the blocks tell (freesCarryAllocStacks): guessed from the first
	// events, and found again once the blocks are paired when the guess
	// was wrong.
	h := newHistory(s, d)
	h.ann = ann
	freeFrames := guess(d.Events)
	var start *phaseStart
	wait := beside.Go(func() {
		h.replayReserved()
		start = startPhases(h, frameHints(h), freeFrames)
	})
	dumped := h.pairEvents()
	wait()
	if actual := freesCarryAllocStacks(h); actual != freeFrames {
		start = startPhases(h, frameHints(h), actual)
	}
	// The rest of the replay (the blocks' sizes, the allocated curve) runs
	// beside the phase passes that read neither, which finish waits for it
	// to end before the first that does.
	waitReplay := func() {}
	if h.finishAddsBlocks() {
		h.finishReplay(dumped) // the passes read the blocks: none may be added beside them
	} else {
		waitReplay = beside.Go(func() { h.finishReplay(dumped) })
	}
	start.finish(h, waitReplay)
	if len(d.Events) >= returnScratchEvents {
		// The phase and step passes leave some ten bytes an event of
		// scratch behind, which the runtime keeps resident; Classify's
		// per-block records then come on top of it, at the analysis's
		// peak. Returned to the system first, they do not. Measured
		// (alternated, 3-5 runs): the 171 MB dense snapshot's peak RSS
		// 252 -> 240 MiB, CPU unchanged within noise; the 200 MB training
		// one 113 -> 108 MiB for 5% more CPU (the forced collection); the
		// 1 GB one 529 -> 519 MiB.
		debug.FreeOSMemory()
	}
	Classify(h)
	if len(d.Events) >= returnScratchEvents {
		// Classification's per-block facts (some twenty bytes a block) are
		// garbage now, but the collection that ran while they were live set
		// the heap's goal above them: the passes after it (leak detection,
		// the results, the what-if) would fill that room with garbage, at
		// the analysis's peak. Collected now, the goal is set from what
		// stays live.
		runtime.GC()
	}
	return h
}

// returnScratchEvents is the fewest events of a device for which
// BuildWithAnnotations returns the phase passes' scratch (about 10 MB) to
// the system: below, a forced collection is not worth what it returns.
const returnScratchEvents = 1 << 20

// guessFreesCarryAllocStacks is freesCarryAllocStacks of the blocks
// allocated and freed within the first guessEvents events, paired by
// address alone: the guess the hints are found with while the blocks are
// paired.
func guessFreesCarryAllocStacks(events []snapshot.Event) bool {
	events = events[:min(len(events), guessEvents)]
	allocStack := make(map[uint64]snapshot.StackID)
	same, diff := 0, 0
	for i := range events {
		e := &events[i]
		if e.Addr == 0 {
			continue // paired by size, not by address
		}
		switch e.Action {
		case snapshot.ActionAlloc:
			allocStack[e.Addr] = e.Stack
		case snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted:
			st, ok := allocStack[e.Addr]
			if !ok {
				continue
			}
			delete(allocStack, e.Addr) // a block's first free carries its free stack
			if st == 0 || e.Stack == 0 {
				continue
			}
			if st == e.Stack {
				same++
			} else {
				diff++
			}
		}
	}
	return carriesAllocStacks(same, diff)
}

// guessEvents is how many events guessFreesCarryAllocStacks reads: enough
// for thousands of blocks, a few milliseconds.
const guessEvents = 1 << 16
