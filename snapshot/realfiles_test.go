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

	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/torchmem/torchmem/snapshot"
)

// TestRealSnapshots reads every real snapshot of ../shared/snapshots and
// checks what the reader built against facts computed independently with
// Python's pickle module. The facts table (realfiles_table_test.go) is
// the output of
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
	var inDir []string
	for _, f := range st.SharedRecorded(t) {
		if strings.HasSuffix(f, ".pickle") || strings.HasSuffix(f, ".pickle.gz") {
			inDir = append(inDir, f)
		}
	}
	checkTableListsFolder(t, "recorded/", inDir, recordedSnapshotFacts, "--recorded")
	checkFactsTable(t, dir, recordedSnapshotFacts)
}

// checkTableListsFolder fails when a facts table and the snapshots of its
// folder differ: a new real file needs its row (snapshot_facts.py flag).
func checkTableListsFolder(t *testing.T, folder string, inDir []string, table []fileFacts, flag string) {
	t.Helper()
	var inTable []string
	for _, f := range table {
		inTable = append(inTable, f.File)
	}
	slices.Sort(inTable)
	if diff := cmp.Diff(inDir, inTable); diff != "" {
		t.Errorf("%s and the facts table list different snapshots; rerun testdata/facts/snapshot_facts.py %s (-folder +table):\n%s", folder, flag, diff)
	}
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
			snap, err := load.Open(path, snapshot.Options{})
			if err != nil {
				t.Fatalf("load.Open(%q): %v", path, err)
			}
			if snap == nil {
				t.Fatalf("load.Open(%q) returned nil, nil", path)
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
