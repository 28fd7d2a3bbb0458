package analysis

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/analysis/suggest"
	"github.com/torchmem/torchmem/diff"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// TestRealFilesInvariants runs Analyze on every real snapshot and trace in
// ../shared and checks what must hold whatever the file: categories add up
// to the allocated bytes at the end, at the peak and at the OOM; the peak
// bounds every phase; the end state of a dump equals its segments; the
// timeline is bounded and holds the peak; suggestions are ranked (by
// savings, empty_cache after the fixes that lower the peak) and carry
// evidence; the JSON has every category key.
func TestRealFilesInvariants(t *testing.T) {
	for _, f := range snapshottest.SharedInputs(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := load.Open(f, snapshot.Options{})
			if err != nil {
				t.Fatalf("reader: %v", err)
			}
			r := Analyze(s, DefaultOptions())
			mismatch := map[int]bool{}
			for _, d := range r.Diagnostics {
				if d.Kind == "replay_mismatch" || d.Kind == "address_reuse" {
					mismatch[d.Device] = true
				}
			}
			for _, d := range r.Devices {
				if got := d.AtEnd.Categories.Total(); got != d.AtEnd.AllocatedBytes {
					t.Errorf("device %d: end categories %d, allocated %d", d.Device, got, d.AtEnd.AllocatedBytes)
				}
				if got := d.Peak.Categories.Total(); got != d.Peak.AllocatedBytes {
					t.Errorf("device %d: peak categories %d, allocated %d", d.Device, got, d.Peak.AllocatedBytes)
				}
				var ruleBytes int64
				for _, u := range d.Rules {
					ruleBytes += u.Bytes
				}
				if ruleBytes != d.AtEnd.AllocatedBytes {
					t.Errorf("device %d: rules hold %d bytes, end %d", d.Device, ruleBytes, d.AtEnd.AllocatedBytes)
				}
				if d.Peak.AllocatedBytes < d.AtEnd.AllocatedBytes {
					t.Errorf("device %d: peak %d below end %d", d.Device, d.Peak.AllocatedBytes, d.AtEnd.AllocatedBytes)
				}
				for _, p := range d.Phases {
					if p.PeakAllocatedBytes > d.Peak.AllocatedBytes || p.PeakAllocatedBytes < 0 {
						t.Errorf("device %d: %s span peak %d outside [0, %d]", d.Device, p.Phase, p.PeakAllocatedBytes, d.Peak.AllocatedBytes)
					}
				}
				// Phase peaks: one per phase, the phase's highest span peak,
				// categories adding up to it; the overall peak's phase holds
				// the overall peak at the same event.
				spanPeaks, order := diff.PhasePeaks(d.Phases)
				if len(d.PhasePeaks) != len(order) {
					t.Errorf("device %d: %d phase peaks for phases %v", d.Device, len(d.PhasePeaks), order)
				}
				for i, pp := range d.PhasePeaks {
					if i < len(order) && pp.Phase != order[i] || pp.AllocatedBytes != spanPeaks[pp.Phase] || pp.Categories.Total() != pp.AllocatedBytes {
						t.Errorf("device %d: phase peak %s %d (categories %d), spans say %d", d.Device, pp.Phase, pp.AllocatedBytes, pp.Categories.Total(), spanPeaks[pp.Phase])
					}
					var siteBytes int64
					for _, st := range pp.TopSites {
						siteBytes += st.Bytes
					}
					if siteBytes > pp.AllocatedBytes || len(pp.TopSites) > DefaultOptions().TopSites {
						t.Errorf("device %d: %s peak sites hold %d of %d", d.Device, pp.Phase, siteBytes, pp.AllocatedBytes)
					}
				}
				if pp := d.PhasePeakOf(d.Peak.Phase); d.Peak.EventIndex >= 0 && (pp == nil || pp.EventIndex != d.Peak.EventIndex || pp.AllocatedBytes != d.Peak.AllocatedBytes) {
					t.Errorf("device %d: peak at event %d in %s, phase peak %+v", d.Device, d.Peak.EventIndex, d.Peak.Phase, pp)
				}
				if o := d.OOM; o != nil {
					if o.Categories.Total() != o.AllocatedBytes || o.Site == "" || o.Verdict == "" || o.AllocatedBytes > d.Peak.AllocatedBytes {
						t.Errorf("device %d: OOM %+v", d.Device, o)
					}
				}
				dev := s.Device(d.Device)
				if len(dev.Segments) > 0 && !mismatch[d.Device] {
					// PyTorch's unit: the blocks in active_allocated state
					// (the dump's allocated_size), not the requested bytes.
					var want, wantReq, res int64
					for _, g := range dev.Segments {
						res += g.TotalSize
						for _, b := range g.Blocks {
							if b.State == snapshot.BlockActiveAllocated {
								want += b.Size
								wantReq += b.RequestedSize
							}
						}
					}
					if d.AtEnd.AllocatedBytes != want || d.AtEnd.ReservedBytes != res {
						t.Errorf("device %d: end %d allocated / %d reserved, the dump says %d / %d", d.Device, d.AtEnd.AllocatedBytes, d.AtEnd.ReservedBytes, want, res)
					}
					if rq := d.AtEnd.RequestedBytes; wantReq > 0 && (rq == nil || *rq != wantReq) {
						t.Errorf("device %d: end requested %v, the dump says %d", d.Device, rq, wantReq)
					}
				}
				if tl := d.Timeline; tl != nil {
					if len(tl.EventIndex) > DefaultMaxTimelinePoints+3 {
						t.Errorf("device %d: %d timeline points", d.Device, len(tl.EventIndex))
					}
					if d.Peak.EventIndex >= 0 && (tl.PeakPoint < 0 || tl.Allocated[tl.PeakPoint] != d.Peak.AllocatedBytes) {
						t.Errorf("device %d: timeline misses the peak", d.Device)
					}
				}
			}
			for i, sg := range r.Suggestions {
				if sg.EstimatedSavingsBytes <= 0 || sg.Because == "" || sg.How == "" || sg.Cost == "" || sg.Title == "" {
					t.Errorf("suggestion %+v lacks evidence", sg)
				}
				if i == 0 {
					continue
				}
				// Ranked by savings, and empty_cache (which does not lower the
				// peak) after every fix that does.
				prev := r.Suggestions[i-1]
				if suggest.LowersPeak(sg.ID) && !suggest.LowersPeak(prev.ID) ||
					suggest.LowersPeak(sg.ID) == suggest.LowersPeak(prev.ID) && sg.EstimatedSavingsBytes > prev.EstimatedSavingsBytes {
					t.Errorf("suggestions not ranked: %s (%d) after %s (%d)", sg.ID, sg.EstimatedSavingsBytes, prev.ID, prev.EstimatedSavingsBytes)
				}
			}
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Devices) > 0 && !strings.Contains(string(b), `"autograd_detail":`) {
				t.Errorf("JSON lacks category keys")
			}
			if r.Leaks == nil || r.Suggestions == nil || r.Diagnostics == nil {
				t.Errorf("nil slices in %s", b[:min(len(b), 200)])
			}
		})
	}
}

// TestRealFilesAllocated checks the allocated bytes of every device of every
// real snapshot, at the end and at the peak, in PyTorch's unit (allocator
// blocks) and in requested bytes, against realAllocatedFacts: the output of
//
//	python3 testdata/facts/snapshot_facts.py --analysis
//
// whose own replay sizes blocks by the caching allocator's rules (see
// block_replay there), ends at each device's Σ allocated_size and
// Σ requested_size of the dump, and counts the blocks whose size nothing in
// the file settles (Unsized).
//
// The snapshots of ../shared/recorded are checked the same way against
// recordedAllocatedFacts (snapshot_facts.py --recorded --analysis).
func TestRealFilesAllocated(t *testing.T) {
	for _, want := range allAllocatedFacts() {
		t.Run(fmt.Sprintf("%s/%d", want.File, want.Device), func(t *testing.T) {
			s := openFacts(t, want.sub, want.File)
			d := s.Device(want.Device)
			if d == nil {
				t.Fatalf("no device %d", want.Device)
			}
			h := history.Build(s, d)
			r := Analyze(s, Options{Device: want.Device, TopSites: 1, NoTimeline: true})
			if len(r.Devices) != 1 {
				t.Fatalf("%d device results", len(r.Devices))
			}
			dr := r.Devices[0]
			got := allocatedFacts{File: want.File, Device: want.Device, sub: want.sub, EndAllocated: dr.AtEnd.AllocatedBytes,
				PeakAllocated: dr.Peak.AllocatedBytes, PeakEvent: dr.Peak.EventIndex, Unsized: h.Sizing.Unknown}
			if dr.AtEnd.RequestedBytes != nil {
				got.EndRequested = *dr.AtEnd.RequestedBytes
			}
			if dr.Peak.RequestedBytes != nil {
				got.PeakRequested = *dr.Peak.RequestedBytes
			}
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			if h.Sizing.Mismatch != 0 {
				t.Errorf("%d blocks live at the dump sized otherwise by the allocator's rules", h.Sizing.Mismatch)
			}
			// The table's end is the dump's own figure, to the byte: Σ
			// allocated_size (and Σ requested_size where every segment
			// states one) of the device's segments, as the file says them.
			if len(d.Segments) > 0 {
				var alloc, req int64
				allReq := true
				for _, g := range d.Segments {
					alloc += g.AllocatedSize
					req += g.RequestedSize
					allReq = allReq && (g.RequestedSize > 0 || g.AllocatedSize == 0)
				}
				if want.EndAllocated != alloc {
					t.Errorf("the table ends at %d allocated, the dump's allocated_size says %d", want.EndAllocated, alloc)
				}
				if allReq && want.EndRequested != req {
					t.Errorf("the table ends at %d requested, the dump's requested_size says %d", want.EndRequested, req)
				}
			}
		})
	}
}

// TestRealFilesAllocatedCoverage: realAllocatedFacts,
// recordedAllocatedFacts and measuredAllocatedFacts have a row for every device of every real snapshot
// that has segments or a trace, so that every device's allocated figure is
// checked against its dump.
func TestRealFilesAllocatedCoverage(t *testing.T) {
	rows := map[string]bool{}
	for _, f := range allAllocatedFacts() {
		rows[fmt.Sprintf("%s/%s/%d", f.sub, f.File, f.Device)] = true
	}
	var files [][2]string
	dir := snapshottest.SharedDir(t, "snapshots")
	for _, pat := range []string{"*.pickle", "*.pkl"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, f := range m {
			files = append(files, [2]string{"snapshots", filepath.Base(f)})
		}
	}
	for _, f := range snapshottest.SharedRecorded(t) {
		if strings.HasSuffix(f, ".pickle") || strings.HasSuffix(f, ".pickle.gz") {
			files = append(files, [2]string{"recorded", f})
		}
	}
	if len(files) == 0 {
		t.Fatalf("no snapshots in %s", dir)
	}
	_, measured := snapshottest.MeasuredSnapshots(t)
	for _, f := range measured {
		files = append(files, [2]string{"measured", f})
	}
	for _, f := range files {
		s := openFacts(t, f[0], f[1])
		for _, d := range s.Devices {
			if len(d.Segments) == 0 && len(d.Events) == 0 {
				continue
			}
			if key := fmt.Sprintf("%s/%s/%d", f[0], f[1], d.ID); !rows[key] {
				t.Errorf("no allocated-facts row for %s (rerun snapshot_facts.py --analysis, with --recorded for recorded/)", key)
			}
		}
	}
}

// allAllocatedFacts is realAllocatedFacts and recordedAllocatedFacts, each
// row with the folder of ../shared it reads.
func allAllocatedFacts() []allocatedFacts {
	var out []allocatedFacts
	for _, f := range realAllocatedFacts {
		f.sub = "snapshots"
		out = append(out, f)
	}
	for _, f := range recordedAllocatedFacts {
		f.sub = "recorded"
		out = append(out, f)
	}
	for _, f := range measuredAllocatedFacts {
		f.sub = "measured"
		out = append(out, f)
	}
	return out
}

// openFacts reads the file of a facts row: from a folder of ../shared, or
// ("measured") this repository's own recordings.
func openFacts(t *testing.T, sub, name string) *snapshot.Snapshot {
	t.Helper()
	if sub != "measured" {
		return analysistest.OpenShared(t, sub, name)
	}
	s, err := load.Open(filepath.Join(measuredHere, name), snapshot.Options{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

// TestRealFilesOOMAllocated checks what is allocated at every real oom entry
// against realOOMFacts (snapshot_facts.py --analysis): blocks and requested
// bytes, and the parameter category against the blocks Module.to made.
func TestRealFilesOOMAllocated(t *testing.T) {
	for _, want := range append(realOOMFacts, recordedOOMFacts...) {
		t.Run(want.File, func(t *testing.T) {
			sub := "snapshots"
			if strings.Contains(want.File, "/") || strings.HasSuffix(want.File, ".gz") {
				sub = "recorded"
			}
			s := analysistest.OpenShared(t, sub, want.File)
			r := Analyze(s, Options{Device: want.Device, TopSites: 1, NoTimeline: true})
			if len(r.Devices) != 1 || r.Devices[0].OOM == nil {
				t.Fatalf("no OOM on device %d", want.Device)
			}
			o := r.Devices[0].OOM
			if o.EventIndex != want.Event || o.AllocatedBytes != want.Allocated || o.AllocatedRequestedBytes == nil || *o.AllocatedRequestedBytes != want.Requested {
				t.Errorf("oom %d: allocated %d, requested %v; want %d: %d, %d", o.EventIndex, o.AllocatedBytes, o.AllocatedRequestedBytes, want.Event, want.Allocated, want.Requested)
			}
			if o.Categories[result.Parameter] != want.ModuleTo {
				t.Errorf("parameters at the oom %d, want the %d blocks of Module.to (%d B)", o.Categories[result.Parameter], want.ModuleToBlocks, want.ModuleTo)
			}
		})
	}
}

// oomFacts are what is allocated at one oom entry.
type oomFacts struct {
	File                          string
	Device, Event, ModuleToBlocks int
	Allocated, Requested          int64
	ModuleTo                      int64
	Attention, AttentionRequested int64
}

// allocatedFacts are one device's allocated bytes (allocator blocks) and
// requested bytes at the end and at the peak; Unsized counts the blocks
// older than the trace and freed in it whose rest nothing in the file shows.
type allocatedFacts struct {
	File                                                     string
	Device                                                   int
	sub                                                      string // the folder of ../shared, or "measured"
	EndAllocated, EndRequested, PeakAllocated, PeakRequested int64
	PeakEvent                                                int
	Unsized                                                  int
}

// Produced by: python3 testdata/facts/snapshot_facts.py --analysis
var realAllocatedFacts = []allocatedFacts{
	{File: "edge_2dev_expandable_no_trace_albi2.pickle", Device: 0, EndAllocated: 8529920, EndRequested: 8529088, PeakAllocated: 8529920, PeakEvent: -1, PeakRequested: 8529088, Unsized: 0},
	{File: "edge_2dev_expandable_no_trace_albi2.pickle", Device: 1, EndAllocated: 8519680, EndRequested: 8519680, PeakAllocated: 8519680, PeakEvent: -1, PeakRequested: 8519680, Unsized: 0},
	{File: "genA_torch2.0_yiyi_1.3b_snapshot.pickle", Device: 0, EndAllocated: 5683450880, EndRequested: 5683449864, PeakAllocated: 5692347392, PeakEvent: -1, PeakRequested: 5692346376, Unsized: 1},
	{File: "genA_torch2.0_yiyi_oom_snapshot.pickle", Device: 0, EndAllocated: 11840159744, EndRequested: 11840159744, PeakAllocated: 11840159744, PeakEvent: -1, PeakRequested: 11840159744, Unsized: 0},
	{File: "genB_torch2.1_cranberrii.pickle", Device: 0, EndAllocated: 2297283072, EndRequested: 2285408452, PeakAllocated: 5914094592, PeakEvent: 3697, PeakRequested: 5876132840, Unsized: 0},
	{File: "genB_torch2.1_maphsge4_multistream_cpp.pickle", Device: 0, EndAllocated: 16199101440, EndRequested: 16199097344, PeakAllocated: 20802387456, PeakEvent: 5317, PeakRequested: 20802383104, Unsized: 0},
	{File: "genB_torch2.1_zijiandu_state_only_diffusion.pickle", Device: 0, EndAllocated: 8548367872, EndRequested: 8521811504, PeakAllocated: 8548367872, PeakEvent: -1, PeakRequested: 8521811504, Unsized: 0},
	{File: "genC_torch2.2_jaspersolt_snapshot_entries.pickle", Device: 0, EndAllocated: 48760832, EndRequested: 48748928, PeakAllocated: 110110720, PeakEvent: 759, PeakRequested: 108258676, Unsized: 0},
	{File: "genC_torch2.2_nesta_OOM_pickle_named_json.pickle", Device: 0, EndAllocated: 22536960512, EndRequested: 22531455488, PeakAllocated: 23380541440, PeakEvent: 1113, PeakRequested: 23374118352, Unsized: 0},
	{File: "genD_torch2.3_hugepanda.pickle", Device: 0, EndAllocated: 3075039744, EndRequested: 3063564800, PeakAllocated: 14401229824, PeakEvent: 2040, PeakRequested: 14401221632, Unsized: 0},
	{File: "genD_torch2.4_lfielike_state_only.pickle", Device: 0, EndAllocated: 16397578240, EndRequested: 16380108168, PeakAllocated: 16397578752, PeakEvent: -1, PeakRequested: 16380108176, Unsized: 0},
	{File: "genE_torch2.5_sqattn.pickle", Device: 0, EndAllocated: 215105536, EndRequested: 215105536, PeakAllocated: 4352809984, PeakEvent: 148, PeakRequested: 4351237120, Unsized: 0},
	{File: "genE_torch2.6x_kkaitlyn_annotations.pickle", Device: 0, EndAllocated: 1043817472, EndRequested: 1029235712, PeakAllocated: 1043817472, PeakEvent: 8506, PeakRequested: 1029235712, Unsized: 0},
	{File: "genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle", Device: 0, EndAllocated: 8094645248, EndRequested: 8094628652, PeakAllocated: 8456489984, PeakEvent: 6278, PeakRequested: 8456473388, Unsized: 0},
	{File: "genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle", Device: 1, EndAllocated: 403507712, EndRequested: 403506116, PeakAllocated: 84063358976, PeakEvent: 420, PeakRequested: 84063351764, Unsized: 0},
	{File: "genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle", Device: 2, EndAllocated: 20230674944, EndRequested: 20230660520, PeakAllocated: 21564660224, PeakEvent: 715, PeakRequested: 21564645800, Unsized: 0},
	{File: "genF_torch2.8_zidongliu_zeroth_order_fl.pickle", Device: 0, EndAllocated: 1014430208, EndRequested: 1011485828, PeakAllocated: 1790894592, PeakEvent: 11205, PeakRequested: 1783664516, Unsized: 0},
	{File: "genG_torch2.10x_bcrafton.pickle", Device: 0, EndAllocated: 3072871424, EndRequested: 3064418304, PeakAllocated: 3861684736, PeakEvent: 1843, PeakRequested: 3849232640, Unsized: 15},
	{File: "genG_torch2.10x_magma27_python_stacks.pickle", Device: 0, EndAllocated: 1377753600, EndRequested: 1373919236, PeakAllocated: 13927832064, PeakEvent: 1402, PeakRequested: 13923997700, Unsized: 1},
	{File: "genG_torch2.1x_wedsonlin_inference.pickle", Device: 0, EndAllocated: 1703276544, EndRequested: 1701310464, PeakAllocated: 1738928128, PeakEvent: 292, PeakRequested: 1736962048, Unsized: 0},
	{File: "kkaitlyn_ctx128_fullstep.pickle", Device: 0, EndAllocated: 54873829888, EndRequested: 54597857284, PeakAllocated: 55079000576, PeakEvent: 19335, PeakRequested: 54802667524, Unsized: 0},
	{File: "nothanmin_fullstep.pickle", Device: 0, EndAllocated: 16019091968, EndRequested: 15568596996, PeakAllocated: 23281500672, PeakEvent: 5701, PeakRequested: 22827925508, Unsized: 80},
	{File: "segments_list_memory_snapshot_muduard.pkl", Device: 1, EndAllocated: 3353639424, EndRequested: 3308174782, PeakAllocated: 3353639424, PeakEvent: -1, PeakRequested: 3308174782, Unsized: 0},
	{File: "wedsonlin_medium_128_training.pickle", Device: 0, EndAllocated: 6816891392, EndRequested: 6808535044, PeakAllocated: 7026606592, PeakEvent: 9966, PeakRequested: 7013335044, Unsized: 0},
	{File: "wedsonlin_medium_256_training.pickle", Device: 0, EndAllocated: 6837944832, EndRequested: 6829096964, PeakAllocated: 9113374720, PeakEvent: 2780, PeakRequested: 9103544320, Unsized: 0},
}

// At each oom entry: allocated (blocks) and requested bytes, and the blocks
// made by Module.to (module.py _apply/convert frames) and by attention
// (scaled_dot_product frames).
var realOOMFacts = []oomFacts{
	{File: "genC_torch2.2_nesta_OOM_pickle_named_json.pickle", Device: 0, Event: 1117, Allocated: 23279878144, Requested: 23273455056, ModuleTo: 135833600, ModuleToBlocks: 132, Attention: 7046430720, AttentionRequested: 7046430720},
	{File: "genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle", Device: 1, Event: 421, Allocated: 84063358976, Requested: 84063351764, ModuleTo: 0, ModuleToBlocks: 0, Attention: 0, AttentionRequested: 0},
}
