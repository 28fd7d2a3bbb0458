package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestAnalyzeGolden pins the text, Markdown and JSON outputs of analyze on
// the demo and on real files (go test ./cmd/torchmem -update rewrites them).
func TestAnalyzeGolden(t *testing.T) {
	demo := filepath.Join(repoRoot(), "testdata", "demo", "oom_snapshot.pickle")
	files := []struct{ name, path string }{
		{"demo", demo},
		{"nesta_oom", shared(t, "snapshots", "genC_torch2.2_nesta_OOM_pickle_named_json.pickle")},
		{"constructorsun_oom", shared(t, "snapshots", "genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle")},
		{"kkaitlyn_fullstep", shared(t, "snapshots", "kkaitlyn_ctx128_fullstep.pickle")},
		{"hta_ddp_trace", shared(t, "traces", "hta_ddp_training_gpu_memory.json.gz")},
	}
	for _, f := range files {
		for _, format := range []string{"text", "markdown", "json"} {
			ext := map[string]string{"text": "txt", "markdown": "md", "json": "json"}[format]
			t.Run(f.name+"."+ext, func(t *testing.T) {
				// The text's first line names the file and wraps by its
				// length: a path relative to the test's folder keeps it the
				// same wherever the checkout lies.
				code, out, stderr := runCLI(nil, "analyze", "--format", format, relative(t, f.path))
				if code != exitOK {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				out = strings.ReplaceAll(out, filepath.Dir(relative(t, f.path))+string(filepath.Separator), "")
				golden(t, "analyze/"+f.name+"."+ext, out)
			})
		}
	}
}

// TestAnalyzeJSONSchema checks the contract of schema torchmem.analysis/v1:
// the top-level keys, every category key always present, exact bytes.
func TestAnalyzeJSONSchema(t *testing.T) {
	demo := filepath.Join(repoRoot(), "testdata", "demo", "oom_snapshot.pickle")
	code, out, stderr := runCLI(nil, "analyze", "--format", "json", demo)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema", "input", "devices", "leaks", "suggestions", "diagnostics"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("missing top-level key %q", k)
		}
	}
	if doc["schema"] != "torchmem.analysis/v1" {
		t.Errorf("schema = %v", doc["schema"])
	}
	dev := doc["devices"].([]any)[0].(map[string]any)
	for _, state := range []string{"at_end", "peak", "oom"} {
		cats := dev[state].(map[string]any)["categories"].(map[string]any)
		for _, c := range []string{"parameter", "gradient", "optimizer_state", "activation", "temporary", "autograd_detail", "input", "unknown"} {
			if _, ok := cats[c]; !ok {
				t.Errorf("%s.categories lacks %q", state, c)
			}
		}
	}
	oom := dev["oom"].(map[string]any)
	// The demo's OOM: the attention scores of batch 24 (24·16·1024²·4 bytes)
	// with 910 MiB free, made by the simulator (snapshottest.DemoConfig).
	if oom["requested_bytes"].(float64) != 24*16*1024*1024*4 || oom["phase"] != "forward" || !strings.Contains(oom["site"].(string), "model.py:64") {
		t.Errorf("oom = %v", oom)
	}
}
