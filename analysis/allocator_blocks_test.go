package analysis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// TestBlockSizesFollowTheAllocator replays simulated runs whose allocator
// (snapshottest.Sim: best fit, should_split, merging of free neighbours)
// keeps unsplit rests in the large pool, and checks the allocated curve in
// PyTorch's unit against the simulator's own count after every event. The
// runs vary what real programs vary: request sizes from bytes to tens of
// MiB, frees in any order, expandable segments, max_split_size, and
// recording that begins after a number of events (blocks older than the
// trace, freed in it).
func TestBlockSizesFollowTheAllocator(t *testing.T) {
	type run struct {
		expandable bool
		maxSplit   int64
		drop       int // trace entries lost before recording began
	}
	var runs []run
	for _, exp := range []bool{false, true} {
		for _, ms := range []int64{0, 64 << 20} {
			for _, drop := range []int{0, 150, 400} {
				runs = append(runs, run{exp, ms, drop})
			}
		}
	}
	for _, r := range runs {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("expandable=%v/max_split=%d/drop=%d/seed=%d", r.expandable, r.maxSplit>>20, r.drop, seed), func(t *testing.T) {
				s := st.NewSim()
				s.Expandable, s.MaxSplitSize = r.expandable, r.maxSplit
				churn(s, seed, 600)
				snap := analysistest.Read(t, s, r.drop)
				h := history.Build(snap, snap.Devices[0])
				want := s.AllocatedAfter(0)[r.drop:]
				got := allocatedCurve(h)
				if len(want) != len(got) {
					t.Fatalf("%d events, the simulator recorded %d", len(got), len(want))
				}
				if h.Sizing.Mismatch != 0 {
					t.Errorf("%d blocks live at the dump sized otherwise than the simulator", h.Sizing.Mismatch)
				}
				// A block older than the trace that nothing in it sizes is
				// its rounded request: its rest (at most 1 MiB, or the
				// oversize rounding of max_split_size) is all that may be
				// missed, and only while it lives.
				slack := int64(h.Sizing.Unknown) * (1 << 20)
				if r.maxSplit > 0 {
					slack = int64(h.Sizing.Unknown) * (20 << 20)
				}
				bad := 0
				for i, w := range want {
					if d := w - got[i]; d < 0 || d > slack || slack == 0 && d != 0 {
						if bad++; bad <= 3 {
							t.Errorf("after event %d: allocated %d, the simulator %d (%d blocks unsized)", i, got[i], w, h.Sizing.Unknown)
						}
					}
				}
				if end := len(want) - 1; got[end] != s.Allocated(0) || h.AllocatedAt(end) != got[end] {
					t.Errorf("at the end %d (AllocatedAt %d), the simulator %d", got[end], h.AllocatedAt(end), s.Allocated(0))
				}
			})
		}
	}
}

// churn runs n allocations and frees of mixed sizes on device 0, the way
// a training loop mixes scalars, small activations, 1–10 MiB tensors
// (carved from 20 MiB segments) and large ones.
func churn(s *st.Sim, seed uint64, n int) {
	x := seed*0x9E3779B97F4A7C15 | 1
	next := func(k uint64) uint64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x % k
	}
	stack := s.Stack(s.F("train.py", 10, "<module>"))
	var live []uint64
	for i := 0; i < n; i++ {
		if len(live) > 0 && next(5) < 2 {
			j := int(next(uint64(len(live))))
			s.Free(0, live[j])
			live = append(live[:j], live[j+1:]...)
			continue
		}
		var size int64
		switch next(4) {
		case 0:
			size = int64(1 + next(4096))
		case 1:
			size = int64(4096 + next(1<<20))
		case 2:
			size = int64(1<<20 + next(9<<20))
		default:
			size = int64(10<<20 + next(90<<20))
		}
		live = append(live, s.Alloc(0, size, stack))
	}
}

// TestSnapshotAndTraceCompare: a snapshot and a chrome trace of one run
// (the simulator writes both: the trace's Bytes are blocks, as the caching
// allocator reports them to the profiler) give the same allocated curve,
// peak and end, in PyTorch's unit — also where large-pool blocks keep an
// unsplit rest.
func TestSnapshotAndTraceCompare(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			s := st.NewSim()
			churn(s, seed, 500)
			snap := analysistest.Read(t, s, 0)
			js := st.ChromeTrace(s, 0)
			tr, err := load.Read(bytes.NewReader(js), "sim.json", int64(len(js)), snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			hs := history.Build(snap, snap.Devices[0])
			ht := history.Build(tr, tr.Device(0))
			var fromSnap []int64
			for i, e := range hs.Device.Events {
				if e.Action == snapshot.ActionAlloc || e.Action == snapshot.ActionFreeRequested {
					fromSnap = append(fromSnap, hs.AllocatedAt(i))
				}
			}
			if fromTrace := allocatedCurve(ht); !slices.Equal(fromSnap, fromTrace) {
				t.Errorf("the curves differ: %d points from the snapshot, %d from the trace", len(fromSnap), len(fromTrace))
			}
			rs, rt := Analyze(snap, DefaultOptions()), Analyze(tr, DefaultOptions())
			ds, dt := rs.Devices[0], rt.Devices[len(rt.Devices)-1]
			if ds.Peak.AllocatedBytes != dt.Peak.AllocatedBytes || ds.AtEnd.AllocatedBytes != dt.AtEnd.AllocatedBytes {
				t.Errorf("snapshot peak %d end %d; trace peak %d end %d", ds.Peak.AllocatedBytes, ds.AtEnd.AllocatedBytes, dt.Peak.AllocatedBytes, dt.AtEnd.AllocatedBytes)
			}
			if rq := ds.AtEnd.RequestedBytes; rq == nil || *rq > ds.AtEnd.AllocatedBytes || dt.AtEnd.RequestedBytes != nil {
				t.Errorf("requested at the end: snapshot %v (allocated %d), trace %v (it has no requests)", rq, ds.AtEnd.AllocatedBytes, dt.AtEnd.RequestedBytes)
			}
		})
	}
}

// TestAllocatedUnitPerFormat: the JSON names the unit of its allocated
// figures: allocator blocks for snapshots and chrome traces (requested
// bytes beside them where the file has requests), the tensors' own sizes
// for a memory timeline, which has no allocator blocks.
func TestAllocatedUnitPerFormat(t *testing.T) {
	for _, tc := range []struct {
		sub, name, unit string
		requested       bool
	}{
		{"snapshots", "genC_torch2.2_nesta_OOM_pickle_named_json.pickle", result.AllocatedUnit, true},
		{"snapshots", "segments_list_memory_snapshot_muduard.pkl", result.AllocatedUnit, true},
		{"traces", "hta_ddp_training_gpu_memory.json.gz", result.AllocatedUnit, false},
		{"traces", "hta_memory_timeline_categories.raw.json.gz", result.AllocatedUnitTensor, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Analyze(analysistest.OpenShared(t, tc.sub, tc.name), Options{TopSites: 1, NoTimeline: true})
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if want := `"allocated_unit":"` + tc.unit + `"`; !strings.Contains(string(b), want) {
				t.Errorf("JSON lacks %s: %.200s", want, b)
			}
			for _, d := range r.Devices {
				if d.Kind == "cpu" {
					continue
				}
				if got := d.AtEnd.RequestedBytes != nil && d.Peak.RequestedBytes != nil; got != tc.requested {
					t.Errorf("device %d: requested bytes beside allocated %v, want %v", d.Device, got, tc.requested)
				}
			}
		})
	}
}

// allocatedCurve is the allocated bytes after every event of h.
func allocatedCurve(h *history.History) []int64 {
	out := make([]int64, 0, h.NumEvents())
	for _, v := range h.AllocatedRange(0, h.NumEvents()-1) {
		out = append(out, v)
	}
	return out
}
