package history

import (
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
	h := Replay(s, d)
	h.ann = ann
	ComputePhases(h)
	Classify(h)
	return h
}
