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
	// The reserved curve and the events' hints from their frames need only
	// the events, the segments and the stacks: they are made on the other
	// core during the replay, which uses neither.
	h := newHistory(s, d)
	var hints []hint
	wait := beside.Go(func() {
		h.replayReserved()
		hints = frameHints(h)
	})
	dumped := h.pairEvents()
	h.ann = ann
	wait()
	// The rest of the replay (the blocks' sizes, the allocated curve) runs
	// beside the phase passes that read neither, which computePhases
	// waits for it to end before the first that does.
	waitReplay := func() {}
	if h.finishAddsBlocks() {
		h.finishReplay(dumped) // the passes read the blocks: none may be added beside them
	} else {
		waitReplay = beside.Go(func() { h.finishReplay(dumped) })
	}
	computePhases(h, hints, waitReplay)
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
