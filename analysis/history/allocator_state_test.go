package history

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// The figures below were computed by testdata/facts/allocator_state_facts.py,
// an independent Python replay written from the format and from PyTorch's
// CUDACachingAllocator.cpp (should_split: a rest of at most 1 MiB is not
// split off a large-pool block without expandable segments).

// TestUnsplitRestsMatchDump: sized by the allocator's split rule, every block
// the trace allocates and the dump still holds has the dump's own block size
// — on every real snapshot, including the blocks whose unsplit rest makes
// them larger than their rounded request.
func TestUnsplitRestsMatchDump(t *testing.T) {
	tests := []struct {
		file              string
		device            int
		checked, withRest int
	}{
		{"genB_torch2.1_cranberrii.pickle", 0, 180, 10},
		{"genB_torch2.1_maphsge4_multistream_cpp.pickle", 0, 5, 0},
		{"genC_torch2.2_jaspersolt_snapshot_entries.pickle", 0, 9, 0},
		{"genC_torch2.2_nesta_OOM_pickle_named_json.pickle", 0, 281, 6},
		{"genD_torch2.3_hugepanda.pickle", 0, 362, 19},
		{"genE_torch2.5_sqattn.pickle", 0, 1, 0},
		{"genE_torch2.6x_kkaitlyn_annotations.pickle", 0, 245, 25},
		{"genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle", 0, 516, 0},
		{"genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle", 1, 24, 0},
		{"genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle", 2, 186, 0},
		{"genF_torch2.8_zidongliu_zeroth_order_fl.pickle", 0, 397, 4},
		{"genG_torch2.10x_bcrafton.pickle", 0, 222, 5},
		{"genG_torch2.10x_magma27_python_stacks.pickle", 0, 2, 0},
		{"kkaitlyn_ctx128_fullstep.pickle", 0, 877, 137},
		{"nothanmin_fullstep.pickle", 0, 329, 108},
		{"wedsonlin_medium_128_training.pickle", 0, 659, 7},
		{"wedsonlin_medium_256_training.pickle", 0, 659, 7},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			s := analysistest.OpenShared(t, "snapshots", tc.file)
			d := s.Device(tc.device)
			dump := map[uint64]int64{}
			for _, g := range d.Segments {
				for _, b := range g.Blocks {
					if b.State == snapshot.BlockActiveAllocated || b.State == snapshot.BlockActivePendingFree {
						dump[b.Address] = b.Size
					}
				}
			}
			// The replay gives blocks live at the dump the dump's size and
			// counts those the allocator's rules size otherwise
			// (sizing.mismatch).
			h := Replay(s, d)
			rules := h.SizingRules()
			checked, withRest := 0, 0
			for _, b := range h.Blocks {
				size, ok := dump[b.Addr]
				if b.Alloc < 0 || b.Free >= 0 || !ok {
					continue
				}
				checked++
				if size > rules.Round(b.Requested) {
					withRest++
				}
				if b.Size != size {
					t.Errorf("block %#x (%d B requested, event %d): sized %d, the dump says %d", b.Addr, b.Requested, b.Alloc, b.Size, size)
				}
			}
			if h.Sizing.Mismatch != 0 {
				t.Errorf("%d blocks live at the dump sized otherwise by the allocator's rules", h.Sizing.Mismatch)
			}
			if checked != tc.checked || withRest != tc.withRest {
				t.Errorf("%d blocks checked, %d with an unsplit rest; want %d, %d", checked, withRest, tc.checked, tc.withRest)
			}
		})
	}
}

// TestAllocatorStateFacts checks the cached free memory rebuilt at the OOMs
// and at the peaks: Nesta's 0.875 MiB rest belongs to its block (cached free
// 17,383,424, not 18,300,928); Constructor-Sun uses expandable segments, so
// every rest is split off and nothing changes; Yiyi's OOM dump has no trace.
// At the peaks that used to get a 7.2/6.0/1.8/1.4 GiB expandable_segments
// saving, most of the cached free memory is wholly free segments, which
// expandable segments do not reclaim: only the free bytes inside segments
// with live blocks are fragmentation.
func TestAllocatorStateFacts(t *testing.T) {
	tests := []struct {
		file                    string
		device, event           int
		request                 int64
		reserved                int64
		cached, largest, inUsed int64
	}{
		{"genC_torch2.2_nesta_OOM_pickle_named_json.pickle", 0, 1117, 402_653_184, 23_297_261_568, 17_383_424, 10_092_544, 17_383_424},
		{"genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle", 1, 421, 5_308_694_528, 84_202_749_952, 139_390_976, 17_313_792, 139_390_976},
		{"genA_torch2.0_yiyi_oom_snapshot.pickle", 0, -1, 0, 11_844_714_496, 4_554_752, 2_080_768, 4_554_752},
		{"genB_torch2.1_zijiandu_state_only_diffusion.pickle", 0, -1, 0, 16_236_150_784, 7_687_782_912, 541_065_216, 1_379_549_696},
		{"genD_torch2.3_hugepanda.pickle", 0, 2040, 0, 20_822_622_208, 6_421_392_384, 1_887_436_800, 115_256_320},
		{"genA_torch2.0_yiyi_1.3b_snapshot.pickle", 0, -1, 0, 7_608_467_456, 1_916_120_064, 207_618_048, 435_530_752},
		{"genE_torch2.5_sqattn.pickle", 0, 148, 0, 5_802_819_584, 1_450_009_600, 411_041_792, 11_363_328},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			s := analysistest.OpenShared(t, "snapshots", tc.file)
			h := Build(s, s.Device(tc.device))
			var reserved int64
			for _, g := range StateAt(h, tc.event) {
				reserved += g.Size
			}
			fr := FragmentationAt(h, tc.event, tc.request)
			if reserved != tc.reserved || fr.CachedFreeBytes != tc.cached || fr.LargestFreeBlockBytes != tc.largest || fr.FreeInUsedSegmentsBytes != tc.inUsed {
				t.Errorf("after event %d: reserved %d, cached free %d, largest %d, in used segments %d; want %d, %d, %d, %d",
					tc.event, reserved, fr.CachedFreeBytes, fr.LargestFreeBlockBytes, fr.FreeInUsedSegmentsBytes,
					tc.reserved, tc.cached, tc.largest, tc.inUsed)
			}
		})
	}
}

// TestStateAtMatchesSimulatedDumps: the allocator simulator keeps a rest of
// at most 1 MiB inside large-pool blocks as PyTorch does; for random
// workloads (sizes just under segment sizes leave such rests), the free
// pieces rebuilt from the final trace at earlier moments are exactly the
// inactive blocks of a dump taken at that moment — also when the recording
// began late and blocks predate the trace.
func TestStateAtMatchesSimulatedDumps(t *testing.T) {
	for _, tc := range []struct {
		seed int64
		drop int
	}{{1, 0}, {2, 0}, {3, 150}, {4, 400}} {
		t.Run(fmt.Sprintf("seed%d_drop%d", tc.seed, tc.drop), func(t *testing.T) {
			rng := rand.New(rand.NewSource(tc.seed))
			s := st.NewSim()
			stack := s.Stack(s.F("model.py", 10, "forward"))
			sizes := []int64{4 << 10, 300 << 10, 1 << 20, 1<<20 + 512, 3 * analysistest.MiB, 9*analysistest.MiB + 700<<10, 19*analysistest.MiB + 600<<10, 19*analysistest.MiB + 100<<10, 24*analysistest.MiB + 300<<10, 63 * analysistest.MiB}
			type check struct {
				events int
				free   map[[2]int64]int
			}
			var checks []check
			var live []uint64
			for op := 0; op < 3000; op++ {
				switch r := rng.Intn(100); {
				case r < 55 || len(live) == 0:
					live = append(live, s.Alloc(0, sizes[rng.Intn(len(sizes))]-int64(rng.Intn(4))*512, stack))
				case r < 99:
					k := rng.Intn(len(live))
					s.Free(0, live[k])
					live = append(live[:k], live[k+1:]...)
				default:
					s.EmptyCache(0)
				}
				if op%500 == 499 && analysistest.TraceLen(s) > tc.drop {
					c := check{events: analysistest.TraceLen(s), free: map[[2]int64]int{}}
					for _, g := range analysistest.Read(t, s, 0).Devices[0].Segments {
						for _, b := range g.Blocks {
							if b.State == snapshot.BlockInactive {
								c.free[[2]int64{int64(b.Address), b.Size}]++
							}
						}
					}
					checks = append(checks, c)
				}
			}
			snap := analysistest.Read(t, s, tc.drop)
			h := Build(snap, snap.Devices[0])
			rested := 0
			rules := h.SizingRules()
			for k := range h.Blocks {
				if b := &h.Blocks[k]; b.Size > rules.Round(b.Requested) {
					rested++
				}
			}
			if rested == 0 {
				t.Fatal("no block keeps an unsplit rest: the workload does not test the rule")
			}
			for _, c := range checks {
				got := map[[2]int64]int{}
				for _, g := range StateAt(h, c.events-1-tc.drop) {
					for _, b := range g.Blocks {
						if b.Free() {
							got[[2]int64{int64(b.Address), b.Size}]++
						}
					}
				}
				if diff := cmp.Diff(c.free, got); diff != "" {
					t.Errorf("after %d entries: free pieces differ from the dump's inactive blocks (-dump +replay):\n%s", c.events, diff)
				}
			}
		})
	}
}
