package history

import (
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestStateAtEndMatchesDump: replayed to the last event, the allocator
// state must be the dump itself — every segment tiled exactly by its pieces,
// and the free pieces adding up to the dump's inactive blocks. At the OOM,
// the free pieces are what the OOM report calls cached free memory.
func TestStateAtEndMatchesDump(t *testing.T) {
	files := []string{
		snapshottest.SharedFile(t, "snapshots", "genC_torch2.2_nesta_OOM_pickle_named_json.pickle"),
		snapshottest.SharedFile(t, "snapshots", "nothanmin_fullstep.pickle"),
		snapshottest.SharedFile(t, "snapshots", "kkaitlyn_ctx128_fullstep.pickle"),
		snapshottest.SharedFile(t, "snapshots", "wedsonlin_medium_128_training.pickle"),
		snapshottest.RepoFile("testdata", "demo", "oom_snapshot.pickle"),
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s, err := load.Open(path, snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			d := s.Devices[0]
			h := Build(s, d)
			var inactive, reserved int64
			for _, g := range d.Segments {
				reserved += g.TotalSize
				for _, b := range g.Blocks {
					if b.State == snapshot.BlockInactive {
						inactive += b.Size
					}
				}
			}
			segs := StateAt(h, h.EndIndex())
			var free, total int64
			for _, g := range segs {
				var sum int64
				next := g.Address
				for _, b := range g.Blocks {
					if b.Address != next {
						t.Fatalf("segment %#x: piece at %#x, want %#x (pieces must tile the segment)", g.Address, b.Address, next)
					}
					next += uint64(b.Size)
					sum += b.Size
					if b.Free() {
						free += b.Size
					}
				}
				if sum != g.Size {
					t.Errorf("segment %#x: pieces sum to %d, segment is %d", g.Address, sum, g.Size)
				}
				total += g.Size
			}
			if total != reserved || free != inactive {
				t.Errorf("at the end: reserved %d free %d, the dump says reserved %d inactive %d", total, free, reserved, inactive)
			}
			for i := range d.Events {
				if d.Events[i].Action != snapshot.ActionOOM {
					continue
				}
				fr := FragmentationAt(h, i, d.Events[i].Size)
				var oomFree int64
				for _, g := range StateAt(h, i) {
					for _, b := range g.Blocks {
						if b.Free() {
							oomFree += b.Size
						}
					}
				}
				if oomFree != fr.CachedFreeBytes {
					t.Errorf("at the OOM: free pieces %d, cached free %d", oomFree, fr.CachedFreeBytes)
				}
			}
		})
	}
}
