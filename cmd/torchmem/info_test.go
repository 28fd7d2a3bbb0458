package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// jsonKeysOutside lists the object keys of a JSON value, except those
// under the keys in skip (whose keys are the file's own: allocator
// settings, annotation or action names).
func jsonKeysOutside(v any, skip map[string]bool, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			*out = append(*out, k)
			if !skip[k] {
				jsonKeysOutside(e, skip, out)
			}
		}
	case []any:
		for _, e := range x {
			jsonKeysOutside(e, skip, out)
		}
	}
}

// TestInfoSaysOnlyWhatItKnows: on every real file, info shows no figure
// the file does not record. A trace has no allocator state (segments,
// blocks, active and requested bytes: null in JSON, not printed); a
// memory timeline states neither its reserved bytes nor a generation
// ("not recorded", null; they were "0 B reserved" and "generation ,").
// Keys are snake case throughout (diagnostics were Kind/Device/Message,
// allocator settings AllocConf/MaxSplitSize/…), device −1 (host memory)
// is null as in analyze.
func TestInfoSaysOnlyWhatItKnows(t *testing.T) {
	files := st.SharedInputs(t) // recorded/ included: its memory timeline and trace
	var timelines, traces, snapshots int
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			code, text, stderr := runCLI(nil, "info", f)
			if code != exitOK {
				t.Fatalf("exit %d %s", code, stderr)
			}
			code, js, _ := runCLI(nil, "info", "--format", "json", f)
			var info struct {
				Format     string  `json:"format"`
				Generation *string `json:"generation"`
				Devices    []struct {
					Device    *int           `json:"device"`
					Kind      string         `json:"kind"`
					Segments  *int           `json:"segments"`
					Active    *int64         `json:"active_bytes"`
					Requested *int64         `json:"requested_bytes"`
					Blocks    map[string]int `json:"blocks_by_state"`
					Reserved  *int64         `json:"reserved_bytes"`
					Allocated *int64         `json:"allocated_bytes"`
					Baseline  *int64         `json:"baseline_bytes"`
				} `json:"devices"`
				Annotations struct {
					Top []any `json:"top"`
				} `json:"annotations"`
			}
			if err := json.Unmarshal([]byte(js), &info); code != exitOK || err != nil {
				t.Fatalf("exit %d %v", code, err)
			}
			var doc any
			_ = json.Unmarshal([]byte(js), &doc)
			var keys []string
			jsonKeysOutside(doc, map[string]bool{"other": true, "trace_entries_by_action": true, "blocks_by_state": true}, &keys)
			for _, k := range keys {
				if strings.IndexFunc(k, unicode.IsUpper) >= 0 {
					t.Errorf("key %q is not snake case", k)
				}
			}
			if info.Annotations.Top == nil {
				t.Error("annotations.top is null, not a list")
			}
			if strings.Contains(text, "generation ,") || (info.Generation == nil) != strings.Contains(text, "generation not recorded") {
				t.Errorf("generation %v, text %q", info.Generation, strings.SplitN(text, "\n", 3)[1])
			}
			state := info.Format == "snapshot" || info.Format == "segment-list"
			switch {
			case info.Format == "memory-timeline":
				timelines++
			case state:
				snapshots++
			default:
				traces++
			}
			for _, d := range info.Devices {
				if (d.Device == nil) != (d.Kind == "cpu") {
					t.Errorf("device %v of kind %s", d.Device, d.Kind)
				}
				known := d.Segments != nil && d.Active != nil && d.Requested != nil && d.Blocks != nil
				if known != state || (d.Segments == nil) != (d.Blocks == nil) {
					t.Errorf("%s: allocator state recorded %v, info says segments %v blocks %v", info.Format, state, d.Segments, d.Blocks)
				}
				if state && (d.Reserved == nil || d.Allocated == nil) {
					t.Errorf("a snapshot's reserved and allocated bytes are null")
				}
				if info.Format == "memory-timeline" && d.Reserved != nil {
					t.Errorf("a memory timeline's reserved bytes: %d", *d.Reserved)
				}
			}
			// Text: "reserved not recorded" exactly for the devices whose
			// reserved bytes are null; a trace's "at end" line never says
			// 0 B reserved unless the file does.
			nulls := 0
			for _, d := range info.Devices {
				if d.Reserved == nil && (d.Allocated != nil || d.Segments != nil) {
					nulls++
				}
			}
			if got := strings.Count(text, "reserved not recorded"); got != nulls {
				t.Errorf("text says \"reserved not recorded\" %d times, JSON has %d null reserved figures:\n%s", got, nulls, text)
			}
		})
	}
	if timelines != 2 || traces < 7 || snapshots < 20 {
		t.Errorf("%d memory timelines, %d traces, %d snapshots", timelines, traces, snapshots)
	}
	// The figures themselves, on a memory timeline (PyTorch's own
	// categories, 317 MiB before profiling) and a ROCm trace.
	_, text, _ := runCLI(nil, "info", shared(t, "traces", "hta_memory_timeline_categories.raw.json.gz"))
	for _, want := range []string{"  format      memory-timeline, gzip, generation not recorded, 63.2 KiB on disk\n",
		"    at end    317 MiB allocated, reserved not recorded\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("memory timeline: no %q in\n%s", want, text)
		}
	}
	_, js, _ := runCLI(nil, "info", "--format", "json", shared(t, "traces", "tracelens_rocm_norm_layers.json.gz"))
	for _, want := range []string{`"device": null,
      "kind": "cpu",
      "segments": null,`, `"reserved_bytes": 8388608,
      "allocated_bytes": 1852416,
      "active_bytes": null,
      "requested_bytes": null,
      "blocks_by_state": null,
      "baseline_bytes": 665600,`} {
		if !strings.Contains(js, want) {
			t.Errorf("ROCm trace: no %q in\n%s", want, js)
		}
	}
}
