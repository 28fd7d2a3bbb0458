package snapshot_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/load/pickle"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// fixtureSim builds a small two-device training-like run with shared frames.
func fixtureSim() *st.Sim {
	s := st.NewSim()
	fwd := s.Stack(s.F("model.py", 93, "forward"), s.F("torch/nn/modules/module.py", 1787, "_call_impl"), s.F("train.py", 40, "<module>"))
	opt := s.Stack(s.F("torch/optim/adamw.py", 120, "_init_group"), s.F("train.py", 45, "<module>"))
	s.Annotate(0, "## forward ##", func() {
		a := s.Alloc(0, 4<<20, fwd)
		b := s.Alloc(0, 1000, fwd)
		s.Free(0, b)
		_ = a
	})
	s.Annotate(0, "Optimizer.step#AdamW.step", func() { s.Alloc(0, 3<<20, opt) })
	s.Alloc(1, 8<<20, fwd)
	return s
}

func mustRead(t *testing.T, data []byte, name string) *snapshot.Snapshot {
	t.Helper()
	s, err := load.Read(bytes.NewReader(data), name, int64(len(data)), snapshot.Options{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

// TestFixtureProtocols reads the same snapshot pickled with the protocols
// real writers use (2: PyTorch's C++ pickler, 4: CPython ≤ 3.13, 5: 3.14),
// gzip-compressed and embedded in a trace_plot HTML page.
func TestFixtureProtocols(t *testing.T) {
	dict := fixtureSim().Snapshot()
	p4 := st.Marshal(dict, 4)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(p4)
	zw.Close()
	padded := append(append([]byte(nil), p4...), bytes.Repeat([]byte{0}, 3-len(p4)%3)...)
	files, _ := json.Marshal([]map[string]string{{"name": "snapshot.pickle", "base64": base64.StdEncoding.EncodeToString(padded)}})
	html := "\n<!DOCTYPE html>\n<html>\n<head>\n</head>\n<body>\n<script type=\"module\">\nimport {add_local_files} from \"https://cdn.jsdelivr.net/gh/pytorch/pytorch@main/torch/utils/viz/MemoryViz.js\"\nconst local_files = " +
		string(files) + "\nadd_local_files(local_files, 'Active Memory Timeline')\n</script>\n</body>\n"
	want := mustRead(t, p4, "p4.pickle")
	cases := []struct {
		name     string
		data     []byte
		format   snapshot.Format
		protocol int
		gzipped  bool
	}{
		{"protocol2", st.Marshal(dict, 2), snapshot.FormatSnapshotPickle, 2, false},
		{"protocol4", p4, snapshot.FormatSnapshotPickle, 4, false},
		{"protocol5", st.Marshal(dict, 5), snapshot.FormatSnapshotPickle, 5, false},
		{"gzip", gz.Bytes(), snapshot.FormatSnapshotPickle, 4, true},
		{"trace_plot", []byte(html), snapshot.FormatTracePlotHTML, 4, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustRead(t, c.data, c.name)
			if got.Source.Format != c.format || got.Source.Protocol != c.protocol || got.Source.Gzipped != c.gzipped {
				t.Errorf("source = %s protocol %d gzip %v, want %s %d %v", got.Source.Format, got.Source.Protocol, got.Source.Gzipped, c.format, c.protocol, c.gzipped)
			}
			if len(got.Devices) != 2 || len(got.Devices[0].Events) != len(want.Devices[0].Events) {
				t.Fatalf("devices/events differ: %d devices", len(got.Devices))
			}
			for i, e := range got.Devices[0].Events {
				if e != want.Devices[0].Events[i] {
					t.Errorf("event %d = %+v, want %+v", i, e, want.Devices[0].Events[i])
				}
			}
			if len(got.Annotations) != 2 || got.Annotations[1].Kind != snapshot.AnnotationOptStep {
				t.Errorf("annotations = %+v", got.Annotations)
			}
		})
	}
	// The model itself: 2 segment_alloc on device 0 (one 20 MiB for the 4 MiB
	// tensor and the 3 MiB one, one 2 MiB small segment), 3 allocs, 1 free.
	d0 := want.Devices[0]
	byAction := map[snapshot.Action]int{}
	for _, e := range d0.Events {
		byAction[e.Action]++
	}
	if byAction[snapshot.ActionAlloc] != 3 || byAction[snapshot.ActionFreeRequested] != 1 || byAction[snapshot.ActionSegmentAlloc] != 2 {
		t.Errorf("actions = %v", byAction)
	}
	if got := want.Frames[want.Stacks[d0.Events[1].Stack][0]]; got.Filename != "model.py" || got.Line != 93 || got.Name != "forward" {
		t.Errorf("innermost frame of the first alloc = %+v", got)
	}
	if len(want.Frames) != 5 {
		t.Errorf("%d unique frames, want 5 (interned)", len(want.Frames))
	}
	if want.Source.Generation != "G (2.10+)" || want.Settings == nil || want.Settings.MaxSplitSize != -1 {
		t.Errorf("generation %q settings %+v", want.Source.Generation, want.Settings)
	}
}

// TestFixtureNewerKeys covers keys no real file has yet: active_pending_free
// blocks, a private segment_pool_id, trace entry pool_id, FX frame fields,
// internal_metadata, trace_alloc_overflowed, unknown keys and actions, and
// integers beyond int64.
func TestFixtureNewerKeys(t *testing.T) {
	s := st.NewSim()
	fx := st.D("filename", "gm.py", "line", 7, "name", "forward", "fx_node_op", "call_function",
		"fx_node_name", "mm_1", "fx_node_target", "aten.mm.default", "fx_original_trace", "File \"m.py\", line 3\n  x @ w")
	a := s.Alloc(0, 1<<20, s.Stack(fx))
	s.Alloc(0, 2048, nil)
	s.MarkPendingFree(0, a)
	s.SetPool(0, [2]int64{1, 7})
	dict := s.Snapshot()
	traces := dict.Vals[1].(*st.List).Items[0].(*st.List)
	hugeLine := new(big.Int).SetUint64(1<<64 - 1)
	traces.Items = append(traces.Items,
		st.D("action", "alloc", "addr", uint64(1<<63+4096), "size", 512, "stream", 0, "pool_id", st.Tuple{1, 7},
			"internal_metadata", "mallocWithAddress", "frames", st.L(st.D("filename", "x.py", "line", hugeLine, "name", "f"))),
		st.D("action", "segment_defrag", "addr", 0, "size", 0, "stream", 0, "brand_new_key", 1))
	settings := dict.Vals[2].(*st.Dict)
	settings.Set("trace_alloc_max_entries", 3).Set("trace_alloc_overflowed", true)
	got := mustRead(t, st.Marshal(dict, 4), "newer.pickle")

	d := got.Devices[0]
	g := d.Segments[0]
	if g.PoolID != [2]int64{1, 7} || g.Blocks[0].State != snapshot.BlockActivePendingFree || g.ActiveSize != g.AllocatedSize+g.Blocks[0].Size {
		t.Errorf("segment = %+v", g)
	}
	f := got.Frames[got.Stacks[g.Blocks[0].Stack][0]]
	if f.FXNodeOp != "call_function" || f.FXNodeTarget != "aten.mm.default" || !strings.Contains(f.FXOriginalTrace, "x @ w") {
		t.Errorf("FX frame = %+v", f)
	}
	n := len(d.Events)
	xpu, unknown := d.Events[n-2], d.Events[n-1]
	if xpu.Addr != 1<<63+4096 || got.Strings[xpu.Meta] != "mallocWithAddress" || got.Frames[got.Stacks[xpu.Stack][0]].Line != -1 {
		t.Errorf("big-int entry = %+v (meta %q)", xpu, got.Strings[xpu.Meta])
	}
	if unknown.Action != snapshot.ActionUnknown {
		t.Errorf("unknown action read as %v", unknown.Action)
	}
	if got.Source.Generation != "H (2.11+)" {
		t.Errorf("generation = %q", got.Source.Generation)
	}
	kinds := map[string]bool{}
	for _, dg := range got.Diagnostics {
		kinds[dg.Kind] = true
	}
	for _, k := range []string{"ring_buffer_overflow", "unknown_action", "skipped_keys"} {
		if !kinds[k] {
			t.Errorf("missing diagnostic %s in %+v", k, got.Diagnostics)
		}
	}
}

// TestRefusesCode: opcodes that import or call are refused with their name
// and offset, before anything is built.
func TestRefusesCode(t *testing.T) {
	cases := []struct {
		name string
		raw  st.Raw
		op   string
	}{
		{"GLOBAL", st.Raw("cos\nsystem\n"), "GLOBAL"},
		{"STACK_GLOBAL", st.Raw("\x8c\x02os\x8c\x06system\x93"), "STACK_GLOBAL"},
		{"REDUCE", st.Raw(")R"), "REDUCE"},
		{"INST", st.Raw("(ios\nsystem\n"), "INST"},
		{"OBJ", st.Raw("(o"), "OBJ"},
		{"NEWOBJ", st.Raw(")\x81"), "NEWOBJ"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := st.Marshal(st.D("segments", st.L(), "device_traces", st.L(c.raw)), 4)
			_, err := load.Read(bytes.NewReader(data), "evil.pickle", -1, snapshot.Options{})
			if err == nil {
				t.Fatal("decoded a pickle that imports or calls code")
			}
			off := bytes.Index(data, []byte(c.raw))
			// The refused opcode is the first byte of the fragment whose opcode is c.op.
			for i := off; i < len(data); i++ {
				if pickle.OpName(data[i]) == c.op {
					off = i
					break
				}
			}
			want := "refusing pickle opcode " + c.op
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "at byte offset "+itoa(off)) {
				t.Errorf("error %q, want %q at offset %d", err, want, off)
			}
		})
	}
}

func itoa(n int) string { return big.NewInt(int64(n)).String() }

// TestFixtureSegmentListAndTuples covers a bare segment list (memory_snapshot())
// and the synthetic-file habit of a list segment_pool_id.
func TestFixtureSegmentListAndTuples(t *testing.T) {
	seg := st.D("device", 0, "address", 1<<40, "total_size", 2<<20, "allocated_size", 512, "active_size", 512,
		"requested_size", 100, "stream", 0, "segment_type", "small", "segment_pool_id", st.L(0, 3),
		"blocks", st.L(st.D("size", 512, "requested_size", 100, "state", "active_allocated"),
			st.D("size", 2<<20-512, "requested_size", 0, "state", "inactive")))
	got := mustRead(t, st.Marshal(st.L(seg), 2), "list.pkl")
	if got.Source.Format != snapshot.FormatSegmentList || len(got.Devices) != 1 {
		t.Fatalf("format %s, %d devices", got.Source.Format, len(got.Devices))
	}
	g := got.Devices[0].Segments[0]
	if g.PoolID != [2]int64{0, 3} || g.Blocks[1].Address != 1<<40+512 {
		t.Errorf("segment = %+v (block addresses are computed by walking, as in 2.0 files)", g)
	}
}
