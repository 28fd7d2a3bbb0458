package snapshot_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/snapshot/snapshottest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/torchmem/torchmem/snapshot"
)

// TestRealSnapshots reads every real snapshot of ../shared/snapshots and
// checks what the reader built against facts computed independently with
// Python's pickle module. The facts table below is the output of
//
//	python3 testdata/facts/snapshot_facts.py [snapshots-dir]
//
// (see the script's docstring for what each figure means). Regenerate it
// there rather than editing numbers by hand. The snapshots themselves are
// never copied into the repository; the test is skipped when they are absent.
// Set TORCHMEM_SHARED to point at another copy of ../shared.
func TestRealSnapshots(t *testing.T) {
	dir := st.SharedDir(t, "snapshots")
	checkTableCoversManifest(t, dir)
	checkFactsTable(t, dir, realSnapshotFacts)
}

// TestRecordedSnapshots does the same for the snapshots PyTorch 2.11 wrote
// in ../shared/recorded (recordedSnapshotFacts, from snapshot_facts.py
// --recorded), and fails when a snapshot there has no row.
func TestRecordedSnapshots(t *testing.T) {
	dir := st.SharedDir(t, "recorded")
	var inDir, inTable []string
	for _, f := range st.SharedRecorded(t) {
		if strings.HasSuffix(f, ".pickle") || strings.HasSuffix(f, ".pickle.gz") {
			inDir = append(inDir, f)
		}
	}
	for _, f := range recordedSnapshotFacts {
		inTable = append(inTable, f.File)
	}
	slices.Sort(inTable)
	if diff := cmp.Diff(inDir, inTable); diff != "" {
		t.Errorf("recorded/ and the facts table list different snapshots; rerun testdata/facts/snapshot_facts.py --recorded (-folder +table):\n%s", diff)
	}
	checkFactsTable(t, dir, recordedSnapshotFacts)
}

// checkFactsTable reads each file of a facts table from dir and compares
// what the reader built with the row.
func checkFactsTable(t *testing.T, dir string, table []fileFacts) {
	for _, want := range table {
		t.Run(want.File, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, want.File)
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("snapshot listed in the facts table is missing: %v", err)
			}
			snap, err := snapshot.Open(path, snapshot.Options{})
			if err != nil {
				t.Fatalf("snapshot.Open(%q): %v", path, err)
			}
			if snap == nil {
				t.Fatalf("snapshot.Open(%q) returned nil, nil", path)
			}
			got := factsOf(t, snap)
			// The raw number of external_annotations entries is not in the
			// model (it pairs START/END into Annotations); keep it from the table.
			got.ExternalAnnotations = want.ExternalAnnotations
			got.File = want.File
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("facts of %s differ from the Python ground truth (-want +got):\n%s", want.File, diff)
			}
		})
	}
}

// fileFacts are the facts snapshot_facts.py prints for one file.
type fileFacts struct {
	File   string
	Format snapshot.Format

	// Segments is the number of segments over all devices; the sizes are
	// Σ total_size, Σ allocated_size and Σ active_size over them.
	Segments                             int
	TotalSize, AllocatedSize, ActiveSize int64
	// BlockStates counts blocks by state, spelled as PyTorch does.
	BlockStates map[string]int

	// Devices: one per index of device_traces and per segment device, by ID.
	Devices []deviceFacts
	// OOMs lists the oom trace entries, device by device, in trace order.
	OOMs []oomFact

	// ExternalAnnotations is len(external_annotations) in the file
	// (documentation only: the model holds paired Annotations).
	ExternalAnnotations int
	// Annotations is START entries plus unmatched END entries.
	Annotations int

	HasSettings        bool // allocator_settings present
	ExpandableSegments bool // allocator_settings.expandable_segments

	// Frames is the number of distinct (filename, line, name); MaxLine the
	// largest line (0 without frames), with 2^64−1 read as −1;
	// UnknownLineFrames the frames with line −1; FramesSHA256 the first 16
	// hex digits of the SHA-256 of the frames sorted by (filename, line,
	// name), each written "filename\x00line\x00name\n".
	Frames            int
	MaxLine           int64
	UnknownLineFrames int
	FramesSHA256      string
}

// deviceFacts are the facts of one device.
type deviceFacts struct {
	ID       int
	Segments int // segments attached to this device
	Events   int // trace entries
	Actions  map[string]int
	// AllocatedSize is Σ allocated_size of the device's segments (blocks in
	// active_allocated state: PyTorch's memory_allocated() unit);
	// RequestedSize Σ requested_size (0 where the file has none).
	AllocatedSize, RequestedSize int64
}

// oomFact is one oom trace entry: Index is its position in Device.Events.
type oomFact struct {
	Device, Index    int
	Size, DeviceFree int64
}

// factsOf computes from the model the facts the Python script computes from
// the pickle.
func factsOf(t *testing.T, s *snapshot.Snapshot) fileFacts {
	t.Helper()
	f := fileFacts{
		Format:      s.Source.Format,
		BlockStates: map[string]int{},
		HasSettings: s.Settings != nil,
		Annotations: len(s.Annotations),
		Frames:      len(s.Frames),
	}
	if s.Settings != nil {
		f.ExpandableSegments = s.Settings.ExpandableSegments
	}
	for i, d := range s.Devices {
		if d == nil {
			t.Errorf("Devices[%d] is nil", i)
			continue
		}
		df := deviceFacts{ID: d.ID, Segments: len(d.Segments), Events: len(d.Events), Actions: map[string]int{}}
		for j, seg := range d.Segments {
			if seg.Device != d.ID {
				t.Errorf("device %d: Segments[%d].Device = %d, want %d", d.ID, j, seg.Device, d.ID)
			}
			f.Segments++
			df.AllocatedSize += seg.AllocatedSize
			df.RequestedSize += seg.RequestedSize
			f.TotalSize += seg.TotalSize
			f.AllocatedSize += seg.AllocatedSize
			f.ActiveSize += seg.ActiveSize
			for _, b := range seg.Blocks {
				f.BlockStates[b.State.String()]++
			}
		}
		for j, e := range d.Events {
			df.Actions[e.Action.String()]++
			if e.Action == snapshot.ActionOOM {
				f.OOMs = append(f.OOMs, oomFact{Device: d.ID, Index: j, Size: e.Size, DeviceFree: e.DeviceFree()})
			}
		}
		f.Devices = append(f.Devices, df)
	}

	type key struct {
		file string
		line int64
		name string
	}
	seen := make(map[key]bool, len(s.Frames))
	keys := make([]key, 0, len(s.Frames))
	for i, fr := range s.Frames {
		k := key{fr.Filename, fr.Line, fr.Name}
		if seen[k] {
			t.Errorf("Frames[%d] = %s:%d:%s is a duplicate (frames must be interned)", i, fr.Filename, fr.Line, fr.Name)
			continue
		}
		seen[k] = true
		keys = append(keys, k)
		if i == 0 || fr.Line > f.MaxLine {
			f.MaxLine = fr.Line
		}
		if fr.Line == -1 {
			f.UnknownLineFrames++
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.file, b.file); c != 0 {
			return c
		}
		if a.line != b.line {
			if a.line < b.line {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s\x00%d\x00%s\n", k.file, k.line, k.name)
	}
	f.FramesSHA256 = hex.EncodeToString(h.Sum(nil))[:16]
	return f
}

// checkTableCoversManifest fails when MANIFEST.json and the facts table list
// different files, so that a new snapshot cannot go untested.
func checkTableCoversManifest(t *testing.T, dir string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "MANIFEST.json"))
	if err != nil {
		t.Fatalf("reading MANIFEST.json: %v", err)
	}
	var manifest []struct {
		File string `json:"file"`
	}
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatalf("parsing MANIFEST.json: %v", err)
	}
	var inManifest, inTable []string
	for _, m := range manifest {
		inManifest = append(inManifest, m.File)
	}
	for _, f := range realSnapshotFacts {
		inTable = append(inTable, f.File)
	}
	slices.Sort(inManifest)
	slices.Sort(inTable)
	if diff := cmp.Diff(inManifest, inTable); diff != "" {
		t.Errorf("facts table and MANIFEST.json list different files; rerun testdata/facts/snapshot_facts.py (-manifest +table):\n%s", diff)
	}
}

// Produced by: python3 testdata/facts/snapshot_facts.py
var realSnapshotFacts = []fileFacts{
	{
		File:     "edge_2dev_expandable_no_trace_albi2.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 3, TotalSize: 85983232, AllocatedSize: 17049600, ActiveSize: 17049600,
		BlockStates: map[string]int{"inactive": 6, "active_allocated": 4},
		Devices: []deviceFacts{
			{ID: 0, Segments: 2, Events: 0, Actions: map[string]int{}, AllocatedSize: 8529920, RequestedSize: 8529088},
			{ID: 1, Segments: 1, Events: 0, Actions: map[string]int{}, AllocatedSize: 8519680, RequestedSize: 8519680},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: true, ExpandableSegments: true,
		Frames: 0, MaxLine: 0, UnknownLineFrames: 0, FramesSHA256: "e3b0c44298fc1c14",
	},
	{
		File:     "edge_no_segments_sunnysood.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 0, TotalSize: 0, AllocatedSize: 0, ActiveSize: 0,
		BlockStates: map[string]int{},
		Devices: []deviceFacts{
			{ID: 0, Segments: 0, Events: 0, Actions: map[string]int{}, AllocatedSize: 0, RequestedSize: 0},
			{ID: 1, Segments: 0, Events: 0, Actions: map[string]int{}, AllocatedSize: 0, RequestedSize: 0},
			{ID: 2, Segments: 0, Events: 0, Actions: map[string]int{}, AllocatedSize: 0, RequestedSize: 0},
			{ID: 3, Segments: 0, Events: 0, Actions: map[string]int{}, AllocatedSize: 0, RequestedSize: 0},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: true, ExpandableSegments: true,
		Frames: 0, MaxLine: 0, UnknownLineFrames: 0, FramesSHA256: "e3b0c44298fc1c14",
	},
	{
		File:     "genA_torch2.0_yiyi_1.3b_snapshot.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 257, TotalSize: 7608467456, AllocatedSize: 5683450880, ActiveSize: 5683450880,
		BlockStates: map[string]int{"inactive": 163, "active_allocated": 785},
		Devices: []deviceFacts{
			{ID: 0, Segments: 257, Events: 1, Actions: map[string]int{"free_completed": 1}, AllocatedSize: 5683450880, RequestedSize: 5683449864},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: false, ExpandableSegments: false,
		Frames: 61, MaxLine: 2515, UnknownLineFrames: 0, FramesSHA256: "b2c04d62e27727a1",
	},
	{
		File:     "genA_torch2.0_yiyi_oom_snapshot.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 176, TotalSize: 11844714496, AllocatedSize: 11840159744, ActiveSize: 11840159744,
		BlockStates: map[string]int{"inactive": 3, "active_allocated": 460},
		Devices: []deviceFacts{
			{ID: 0, Segments: 176, Events: 1, Actions: map[string]int{"snapshot": 1}, AllocatedSize: 11840159744, RequestedSize: 11840159744},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: false, ExpandableSegments: false,
		Frames: 12, MaxLine: 1345, UnknownLineFrames: 0, FramesSHA256: "ef138538bcfe72a2",
	},
	{
		File:     "genB_torch2.1_cranberrii.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 215, TotalSize: 6471811072, AllocatedSize: 2297283072, ActiveSize: 2297283072,
		BlockStates: map[string]int{"inactive": 277, "active_allocated": 802},
		Devices: []deviceFacts{
			{ID: 0, Segments: 215, Events: 10307, Actions: map[string]int{"alloc": 3505, "free_requested": 3325, "free_completed": 3325, "segment_alloc": 152}, AllocatedSize: 2297283072, RequestedSize: 2285408452},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: false, ExpandableSegments: false,
		Frames: 551, MaxLine: 7494, UnknownLineFrames: 0, FramesSHA256: "59f768ee8095ff28",
	},
	{
		File:     "genB_torch2.1_maphsge4_multistream_cpp.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 136, TotalSize: 18566086656, AllocatedSize: 16199101440, ActiveSize: 16199101440,
		BlockStates: map[string]int{"inactive": 4, "active_allocated": 200},
		Devices: []deviceFacts{
			{ID: 0, Segments: 136, Events: 10327, Actions: map[string]int{"alloc": 3058, "free_requested": 3053, "free_completed": 3053, "segment_alloc": 584, "segment_free": 579}, AllocatedSize: 16199101440, RequestedSize: 16199097344},
			{ID: 1, Segments: 0, Events: 0, Actions: map[string]int{}, AllocatedSize: 0, RequestedSize: 0},
			{ID: 2, Segments: 0, Events: 0, Actions: map[string]int{}, AllocatedSize: 0, RequestedSize: 0},
			{ID: 3, Segments: 0, Events: 0, Actions: map[string]int{}, AllocatedSize: 0, RequestedSize: 0},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: false, ExpandableSegments: false,
		Frames: 415, MaxLine: 2233, UnknownLineFrames: 0, FramesSHA256: "9b599b88b8d1e151",
	},
	{
		File:     "genB_torch2.1_zijiandu_state_only_diffusion.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 499, TotalSize: 16236150784, AllocatedSize: 8548367872, ActiveSize: 8548367872,
		BlockStates: map[string]int{"inactive": 450, "active_allocated": 2524},
		Devices: []deviceFacts{
			{ID: 0, Segments: 499, Events: 0, Actions: map[string]int{}, AllocatedSize: 8548367872, RequestedSize: 8521811504},
			{ID: 1, Segments: 0, Events: 0, Actions: map[string]int{}, AllocatedSize: 0, RequestedSize: 0},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: false, ExpandableSegments: false,
		Frames: 139, MaxLine: 8769, UnknownLineFrames: 0, FramesSHA256: "b4aadfa09e604400",
	},
	{
		File:     "genC_torch2.2_jaspersolt_snapshot_entries.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 10, TotalSize: 134217728, AllocatedSize: 48760832, ActiveSize: 48760832,
		BlockStates: map[string]int{"inactive": 14, "active_allocated": 40},
		Devices: []deviceFacts{
			{ID: 0, Segments: 10, Events: 5803, Actions: map[string]int{"alloc": 1935, "free_requested": 1926, "free_completed": 1926, "segment_alloc": 7, "snapshot": 9}, AllocatedSize: 48760832, RequestedSize: 48748928},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: false, ExpandableSegments: false,
		Frames: 449, MaxLine: 2482, UnknownLineFrames: 0, FramesSHA256: "44d45b87b2056253",
	},
	{
		File:     "genC_torch2.2_nesta_OOM_pickle_named_json.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 120, TotalSize: 22571646976, AllocatedSize: 22536960512, ActiveSize: 22536960512,
		BlockStates: map[string]int{"inactive": 26, "active_allocated": 281},
		Devices: []deviceFacts{
			{ID: 0, Segments: 120, Events: 1299, Actions: map[string]int{"alloc": 576, "free_requested": 295, "free_completed": 295, "segment_alloc": 126, "segment_free": 6, "oom": 1}, AllocatedSize: 22536960512, RequestedSize: 22531455488},
		},
		OOMs: []oomFact{
			{Device: 0, Index: 1117, Size: 402653184, DeviceFree: 264634368},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: false, ExpandableSegments: false,
		Frames: 560, MaxLine: 2546, UnknownLineFrames: 0, FramesSHA256: "c025714e4b03b4b9",
	},
	{
		File:     "genD_torch2.3_hugepanda.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 51, TotalSize: 20860370944, AllocatedSize: 3075039744, ActiveSize: 3075039744,
		BlockStates: map[string]int{"inactive": 53, "active_allocated": 399},
		Devices: []deviceFacts{
			{ID: 0, Segments: 51, Events: 3797, Actions: map[string]int{"alloc": 1491, "free_requested": 1129, "free_completed": 1129, "segment_alloc": 48}, AllocatedSize: 3075039744, RequestedSize: 3063564800},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: true, ExpandableSegments: false,
		Frames: 358, MaxLine: 7494, UnknownLineFrames: 0, FramesSHA256: "b11cd5a6b2989bb6",
	},
	{
		File:     "genD_torch2.4_lfielike_state_only.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 259, TotalSize: 17133731840, AllocatedSize: 16397578240, ActiveSize: 16397578240,
		BlockStates: map[string]int{"inactive": 29, "active_allocated": 839},
		Devices: []deviceFacts{
			{ID: 0, Segments: 259, Events: 1, Actions: map[string]int{"free_completed": 1}, AllocatedSize: 16397578240, RequestedSize: 16380108168},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: true, ExpandableSegments: false,
		Frames: 35, MaxLine: 3258, UnknownLineFrames: 0, FramesSHA256: "43fead7bfde6e407",
	},
	{
		File:     "genE_torch2.5_sqattn.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 4, TotalSize: 230686720, AllocatedSize: 215105536, ActiveSize: 215105536,
		BlockStates: map[string]int{"inactive": 5, "active_allocated": 5},
		Devices: []deviceFacts{
			{ID: 0, Segments: 4, Events: 9576, Actions: map[string]int{"alloc": 2912, "free_requested": 2912, "free_completed": 2912, "segment_alloc": 420, "segment_free": 420}, AllocatedSize: 215105536, RequestedSize: 215105536},
			{ID: 1, Segments: 0, Events: 0, Actions: map[string]int{}, AllocatedSize: 0, RequestedSize: 0},
			{ID: 2, Segments: 0, Events: 0, Actions: map[string]int{}, AllocatedSize: 0, RequestedSize: 0},
			{ID: 3, Segments: 0, Events: 0, Actions: map[string]int{}, AllocatedSize: 0, RequestedSize: 0},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: true, ExpandableSegments: false,
		Frames: 302, MaxLine: 7494, UnknownLineFrames: 0, FramesSHA256: "295f9850d540d33f",
	},
	{
		File:     "genE_torch2.6x_kkaitlyn_annotations.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 30, TotalSize: 1107296256, AllocatedSize: 1043817472, ActiveSize: 1043817472,
		BlockStates: map[string]int{"inactive": 9, "active_allocated": 369},
		Devices: []deviceFacts{
			{ID: 0, Segments: 30, Events: 8507, Actions: map[string]int{"alloc": 2998, "free_requested": 2753, "free_completed": 2753, "segment_alloc": 3}, AllocatedSize: 1043817472, RequestedSize: 1029235712},
		},
		ExternalAnnotations: 714, Annotations: 357,
		HasSettings: true, ExpandableSegments: false,
		Frames: 560, MaxLine: 3198, UnknownLineFrames: 1, FramesSHA256: "1a210e66774cc202",
	},
	{
		File:     "genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 12, TotalSize: 114628231168, AllocatedSize: 28728827904, ActiveSize: 28728827904,
		BlockStates: map[string]int{"inactive": 64, "active_allocated": 726},
		Devices: []deviceFacts{
			{ID: 0, Segments: 2, Events: 6445, Actions: map[string]int{"alloc": 2434, "free_requested": 1918, "free_completed": 1918, "segment_map": 175}, AllocatedSize: 8094645248, RequestedSize: 8094628652},
			{ID: 1, Segments: 8, Events: 596, Actions: map[string]int{"alloc": 199, "free_requested": 175, "free_completed": 175, "segment_map": 40, "segment_unmap": 6, "oom": 1}, AllocatedSize: 403507712, RequestedSize: 403506116},
			{ID: 2, Segments: 2, Events: 882, Actions: map[string]int{"alloc": 392, "free_requested": 206, "free_completed": 206, "segment_map": 78}, AllocatedSize: 20230674944, RequestedSize: 20230660520},
			{ID: 3, Segments: 0, Events: 0, Actions: map[string]int{}, AllocatedSize: 0, RequestedSize: 0},
		},
		OOMs: []oomFact{
			{Device: 1, Index: 421, Size: 5308694528, DeviceFree: 95682560},
		},
		ExternalAnnotations: 4, Annotations: 2,
		HasSettings: true, ExpandableSegments: true,
		Frames: 825, MaxLine: 4346, UnknownLineFrames: 0, FramesSHA256: "78e2966ca4f71270",
	},
	{
		File:     "genF_torch2.8_zidongliu_zeroth_order_fl.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 61, TotalSize: 1897922560, AllocatedSize: 1014430208, ActiveSize: 1014430208,
		BlockStates: map[string]int{"inactive": 71, "active_allocated": 397},
		Devices: []deviceFacts{
			{ID: 0, Segments: 61, Events: 23105, Actions: map[string]int{"alloc": 7946, "free_requested": 7549, "free_completed": 7549, "segment_alloc": 61}, AllocatedSize: 1014430208, RequestedSize: 1011485828},
		},
		ExternalAnnotations: 8, Annotations: 4,
		HasSettings: true, ExpandableSegments: false,
		Frames: 137, MaxLine: 4343, UnknownLineFrames: 0, FramesSHA256: "d2cb242bf7182cfd",
	},
	{
		File:     "genG_torch2.10x_bcrafton.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 96, TotalSize: 4238344192, AllocatedSize: 3072871424, ActiveSize: 3072871424,
		BlockStates: map[string]int{"inactive": 103, "active_allocated": 447},
		Devices: []deviceFacts{
			{ID: 0, Segments: 96, Events: 6486, Actions: map[string]int{"alloc": 2162, "free_requested": 2162, "free_completed": 2162}, AllocatedSize: 3072871424, RequestedSize: 3064418304},
		},
		ExternalAnnotations: 2, Annotations: 1,
		HasSettings: true, ExpandableSegments: false,
		Frames: 443, MaxLine: 3220, UnknownLineFrames: 0, FramesSHA256: "75768a6774c51a25",
	},
	{
		File:     "genG_torch2.10x_magma27_python_stacks.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 216, TotalSize: 14180941824, AllocatedSize: 1377753600, ActiveSize: 1377753600,
		BlockStates: map[string]int{"inactive": 226, "active_allocated": 229},
		Devices: []deviceFacts{
			{ID: 0, Segments: 216, Events: 5163, Actions: map[string]int{"alloc": 1721, "free_requested": 1721, "free_completed": 1721}, AllocatedSize: 1377753600, RequestedSize: 1373919236},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: true, ExpandableSegments: false,
		Frames: 55, MaxLine: 1790, UnknownLineFrames: 0, FramesSHA256: "3ffa1d948fd38897",
	},
	{
		File:     "genG_torch2.1x_wedsonlin_inference.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 98, TotalSize: 1763704832, AllocatedSize: 1703276544, ActiveSize: 1703276544,
		BlockStates: map[string]int{"inactive": 7, "active_allocated": 223},
		Devices: []deviceFacts{
			{ID: 0, Segments: 98, Events: 3840, Actions: map[string]int{"alloc": 1280, "free_requested": 1280, "free_completed": 1280}, AllocatedSize: 1703276544, RequestedSize: 1701310464},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: true, ExpandableSegments: false,
		Frames: 243, MaxLine: 1790, UnknownLineFrames: 0, FramesSHA256: "7e421aa9a3f61ba6",
	},
	{
		File:     "kkaitlyn_ctx128_fullstep.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 1010, TotalSize: 61111009280, AllocatedSize: 54873829888, ActiveSize: 54873829888,
		BlockStates: map[string]int{"inactive": 324, "active_allocated": 1201},
		Devices: []deviceFacts{
			{ID: 0, Segments: 1010, Events: 19342, Actions: map[string]int{"alloc": 6771, "free_requested": 5894, "free_completed": 5894, "segment_alloc": 783}, AllocatedSize: 54873829888, RequestedSize: 54597857284},
		},
		ExternalAnnotations: 4, Annotations: 2,
		HasSettings: true, ExpandableSegments: false,
		Frames: 555, MaxLine: 1750, UnknownLineFrames: 0, FramesSHA256: "65d3ec61c68b6b66",
	},
	{
		File:     "nothanmin_fullstep.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 999, TotalSize: 23842521088, AllocatedSize: 16019091968, ActiveSize: 16019091968,
		BlockStates: map[string]int{"inactive": 674, "active_allocated": 1313},
		Devices: []deviceFacts{
			{ID: 0, Segments: 999, Events: 19464, Actions: map[string]int{"alloc": 6488, "free_requested": 6488, "free_completed": 6488}, AllocatedSize: 16019091968, RequestedSize: 15568596996},
		},
		ExternalAnnotations: 4, Annotations: 2,
		HasSettings: true, ExpandableSegments: false,
		Frames: 558, MaxLine: 8770, UnknownLineFrames: 0, FramesSHA256: "e06c232a9e21ccf9",
	},
	{
		File:     "segments_list_memory_snapshot_muduard.pkl",
		Format:   snapshot.FormatSegmentList,
		Segments: 255, TotalSize: 3649044480, AllocatedSize: 3353639424, ActiveSize: 3353639424,
		BlockStates: map[string]int{"inactive": 202, "active_allocated": 1938},
		Devices: []deviceFacts{
			{ID: 1, Segments: 255, Events: 0, Actions: map[string]int{}, AllocatedSize: 3353639424, RequestedSize: 3308174782},
		},
		ExternalAnnotations: 0, Annotations: 0,
		HasSettings: false, ExpandableSegments: false,
		Frames: 34, MaxLine: 2546, UnknownLineFrames: 0, FramesSHA256: "1bf75d4b122775a8",
	},
	{
		File:     "wedsonlin_medium_128_training.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 377, TotalSize: 7235174400, AllocatedSize: 6816891392, ActiveSize: 6816891392,
		BlockStates: map[string]int{"inactive": 33, "active_allocated": 885},
		Devices: []deviceFacts{
			{ID: 0, Segments: 377, Events: 19136, Actions: map[string]int{"alloc": 6526, "free_requested": 6305, "free_completed": 6305}, AllocatedSize: 6816891392, RequestedSize: 6808535044},
		},
		ExternalAnnotations: 2, Annotations: 1,
		HasSettings: true, ExpandableSegments: false,
		Frames: 511, MaxLine: 1790, UnknownLineFrames: 0, FramesSHA256: "70aa1148f9efb6ab",
	},
	{
		File:     "wedsonlin_medium_256_training.pickle",
		Format:   snapshot.FormatSnapshotPickle,
		Segments: 495, TotalSize: 9265217536, AllocatedSize: 6837944832, ActiveSize: 6837944832,
		BlockStates: map[string]int{"inactive": 138, "active_allocated": 885},
		Devices: []deviceFacts{
			{ID: 0, Segments: 495, Events: 19430, Actions: map[string]int{"alloc": 6624, "free_requested": 6403, "free_completed": 6403}, AllocatedSize: 6837944832, RequestedSize: 6829096964},
		},
		ExternalAnnotations: 2, Annotations: 1,
		HasSettings: true, ExpandableSegments: false,
		Frames: 513, MaxLine: 1790, UnknownLineFrames: 0, FramesSHA256: "940839b061241294",
	},
}
