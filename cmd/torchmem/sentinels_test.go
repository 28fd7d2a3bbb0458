package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// noReserved lists the devices of the real files that state no reserved
// memory, as "file kind" (read with python3 gzip+json: the [memory] events'
// args): the 2021 kineto trace's [memory] events carry Bytes only, on the
// CPU and on cuda:0; the memory timeline (export_memory_timeline raw) is a
// list of (time, action, bytes, category) rows; and a CPU's Total Reserved
// is always 0 (the host allocator caches nothing), in
// hta_ddp, tracelens_resnet18, tracelens_rocm_norm_layers and PyTorch
// 2.11's traces in recorded/ (813 and 6 CPU events, all 0). Every other
// device has dump-time segments or a Total Reserved on every event.
var noReserved = map[string]bool{
	"hta_ddp_training_gpu_memory.json.gz cpu":                    true,
	"kineto_resnet50_legacy_v100.json.gz cpu":                    true,
	"kineto_resnet50_legacy_v100.json.gz cuda":                   true,
	"hta_memory_timeline_categories.raw.json.gz cuda":            true,
	"tracelens_resnet18_train_cpu_memory_stacks.json.gz cpu":     true,
	"tracelens_rocm_norm_layers.json.gz cpu":                     true,
	"hf_llama_mixed_ckpt_train.trace.json.gz cpu":                true,
	"trace_rank0_824.json.gz cpu":                                true,
	"hf_llama_mixed_ckpt_train.memory_timeline.raw.json.gz cuda": true,
}

// sentinelText matches what no text, Markdown or HTML report may say: an
// event, device or step −1, the CPU as "cpu:-1", a step 0 that is no step.
var sentinelText = regexp.MustCompile(`event -1|[Dd]evice -1|cpu:-1|step -1|\(step 0\)|, step 0\b|on device -1`)

// TestNoSentinelsInOutput runs analyze in every format, and report, on
// every real file: no output shows a value that stands for "none" inside
// torchmem. The JSON says null instead (reserved_bytes exactly where the
// file states no reserved memory), and host memory comes after the
// accelerators.
func TestNoSentinelsInOutput(t *testing.T) {
	dir := t.TempDir()
	for _, f := range st.SharedInputs(t) {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			code, out, stderr := runCLI(nil, "analyze", "--format", "json", f)
			if code != exitOK {
				t.Fatalf("analyze: exit %d: %s", code, stderr)
			}
			var res map[string]any
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatal(err)
			}
			checkJSONNulls(t, name, res)

			texts := map[string]string{}
			for _, format := range []string{"text", "markdown"} {
				_, texts[format], _ = runCLI(nil, "analyze", "--format", format, f)
			}
			html := filepath.Join(dir, name+".html")
			if code, _, stderr := runCLI(nil, "report", f, "-o", html); code != exitOK {
				t.Fatalf("report: exit %d: %s", code, stderr)
			}
			page, err := os.ReadFile(html)
			if err != nil {
				t.Fatal(err)
			}
			texts["html"] = string(page)
			for format, s := range texts {
				if m := sentinelText.FindString(s); m != "" {
					t.Errorf("%s says %q", format, m)
				}
				if strings.Contains(s, "reserved 0 B") || strings.Contains(s, "0 B reserved") ||
					strings.Contains(s, "<dt>reserved at peak</dt><dd>0 B</dd>") {
					t.Errorf("%s says 0 B reserved", format)
				}
			}
		})
	}
}

// checkJSONNulls checks the analysis JSON of one real file.
func checkJSONNulls(t *testing.T, name string, res map[string]any) {
	t.Helper()
	devices, _ := res["devices"].([]any)
	host := false
	for _, dv := range devices {
		d := dv.(map[string]any)
		kind, _ := d["kind"].(string)
		if id, ok := d["device"].(float64); ok && id < 0 || d["device"] == nil && kind != "cpu" {
			t.Errorf("device %v of kind %s", d["device"], kind)
		}
		if kind == "cpu" {
			host = true
		} else if host {
			t.Errorf("%s device after host memory", kind)
		}
		want := noReserved[name+" "+kind]
		for _, at := range []string{"at_end", "peak", "oom"} {
			m, ok := d[at].(map[string]any)
			if !ok {
				continue
			}
			if got := m["reserved_bytes"] == nil; got != want {
				t.Errorf("%s %s reserved_bytes %v: want null=%v", kind, at, m["reserved_bytes"], want)
			}
		}
	}
	for _, dg := range res["diagnostics"].([]any) {
		if id, ok := dg.(map[string]any)["device"].(float64); ok && id < 0 {
			t.Errorf("diagnostic on device %v", id)
		}
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		case float64:
			key := path[strings.LastIndex(path, ".")+1:]
			switch {
			case strings.HasSuffix(key, "_us") && x == 0,
				(strings.HasSuffix(key, "event") || strings.HasSuffix(key, "event_index") || key == "step" || key == "device") && x < 0:
				t.Errorf("%s = %v", path, x)
			}
		}
	}
	walk("", res)
}
