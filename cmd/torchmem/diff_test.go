package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/diff"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// gateDir is testdata/gate with a trailing separator, so that outputs can
// be made machine-independent by cutting it from paths.
// gateDir is the testdata/gate folder, relative to the package folder (the
// working directory of its tests): outputs wrap at 100 columns before
// machineFree cuts the folder, so its length must not depend on where the
// repository is checked out.
func gateDir() string {
	return filepath.Join("..", "..", "testdata", "gate") + string(filepath.Separator)
}

func gateFile(name string) string { return gateDir() + name }

// writeTemp writes data to a file in dir and returns its path.
func writeTemp(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// simSnapshot writes a small training run of the allocator simulator; batch
// scales its activations. Its sizes are a small real model's (hidden 1024,
// sequence 512: 96 MiB of parameters, about 100 MiB of activations per
// sample), so that a batch twice as large grows by far more than check's
// noise floor.
func simSnapshot(t *testing.T, dir, name string, batch int64) string {
	t.Helper()
	c := st.TrainConfig{Layers: 2, Hidden: 1024, Seq: 512, Batch: batch, Heads: 8, Steps: 2, NoBwdStack: true}
	return writeTemp(t, dir, name, st.Marshal(st.Train(c).Snapshot(), 4))
}

func TestDiffGolden(t *testing.T) {
	cases := []struct {
		golden string
		args   []string
	}{
		{"gate/diff.txt", []string{"diff", gateFile("base.json"), gateFile("new.json")}},
		{"gate/diff.md", []string{"diff", "--format", "markdown", gateFile("base.json"), gateFile("new.json")}},
		{"gate/diff.json", []string{"diff", "--format", "json", gateFile("base.json"), gateFile("new.json")}},
		{"gate/diff_device1.txt", []string{"diff", "--device", "1", gateFile("new.json"), gateFile("base.json")}},
		{"gate/diff_same.txt", []string{"diff", gateFile("base.json"), gateFile("base.json")}},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			code, out, stderr := runCLI(nil, c.args...)
			if code != exitOK || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			golden(t, c.golden, strings.ReplaceAll(out, gateDir(), ""))
		})
	}
}

func TestDiffExitCodes(t *testing.T) {
	dir := t.TempDir()
	base, err := os.ReadFile(gateFile("base.json"))
	if err != nil {
		t.Fatal(err)
	}
	two := writeTemp(t, dir, "two.json", []byte("["+string(base)+","+string(base)+"]"))
	one := writeTemp(t, dir, "one.json", []byte("[\n"+string(base)+"]"))
	broken := writeTemp(t, dir, "broken.json", base[:len(base)/2])
	diffJSON := writeTemp(t, dir, "diff.json", []byte(`{"schema": "torchmem.diff/v1", "devices": []}`))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(base); err != nil || zw.Close() != nil {
		t.Fatal("gzip")
	}
	gzipped := writeTemp(t, dir, "base.json.gz", gz.Bytes())
	badCat := writeTemp(t, dir, "badcat.json", []byte(strings.Replace(string(base), `"category": "activation"`, `"category": "activations"`, 1)))
	cases := []struct {
		name  string
		stdin []byte
		args  []string
		code  int
		want  string // in stderr (or stdout for exit 0)
	}{
		{"ok", nil, []string{"diff", gateFile("base.json"), gateFile("new.json")}, exitOK, "+1.00 GiB (+10.0%)"},
		{"array of one", nil, []string{"diff", one, gateFile("new.json")}, exitOK, "torchmem diff"},
		{"stdin", base, []string{"diff", "-", gateFile("new.json")}, exitOK, "base  - (snapshot"},
		{"gzip", nil, []string{"diff", gzipped, gateFile("new.json")}, exitOK, "base  " + gzipped},
		{"gzip stdin", gz.Bytes(), []string{"diff", "-", gateFile("new.json")}, exitOK, "+1.00 GiB (+10.0%)"},
		{"max input", nil, []string{"--max-input-bytes", "1KiB", "diff", gateFile("base.json"), gateFile("new.json")}, exitInput, "base.json: past the limit of 1024 bytes"},
		{"max input gzip", nil, []string{"--max-input-bytes", "1KiB", "diff", gzipped, gateFile("new.json")}, exitInput, "base.json.gz: past the limit of 1024 bytes"},
		{"one argument", nil, []string{"diff", gateFile("base.json")}, exitInput, "accepts 2 arg(s), received 1"},
		{"missing file", nil, []string{"diff", filepath.Join(dir, "nope.pickle"), gateFile("new.json")}, exitInput, "nope.pickle: no such file or directory"},
		{"two analyses", nil, []string{"diff", two, gateFile("new.json")}, exitInput, "two.json: holds 2 analyses; want one"},
		{"truncated JSON", nil, []string{"diff", gateFile("base.json"), broken}, exitInput, "broken.json: not a valid torchmem analysis"},
		{"a diff is not an analysis", nil, []string{"diff", diffJSON, gateFile("new.json")}, exitInput, "schema torchmem.diff/v1 is not an analysis"},
		{"unknown category", nil, []string{"diff", badCat, gateFile("new.json")}, exitInput, `unknown category "activations"`},
		{"both stdin", nil, []string{"diff", "-", "-"}, exitInput, "cannot both be -"},
		{"no such device", nil, []string{"diff", "--device", "5", gateFile("base.json"), gateFile("new.json")}, exitInput, "no device 5 in"},
		{"bad format", nil, []string{"diff", "--format", "html", gateFile("base.json"), gateFile("new.json")}, exitInput, `--format "html"`},
		{"not a snapshot", nil, []string{"diff", writeTemp(t, dir, "x.txt", []byte("hello")), gateFile("new.json")}, exitInput, "x.txt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(c.stdin, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, c.code, stderr)
			}
			where := stderr
			if code == exitOK {
				where = stdout
			} else if stdout != "" || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
				t.Errorf("bad input: stdout %q, stderr %q: want one error line", stdout, stderr)
			}
			if !strings.Contains(where, c.want) {
				t.Errorf("output %q, want %q", where, c.want)
			}
		})
	}
}

// TestDiffBaselineEqualsSnapshot checks that a run given as the JSON of
// torchmem analyze diffs exactly like the snapshot it was written from.
func TestDiffBaselineEqualsSnapshot(t *testing.T) {
	dir := t.TempDir()
	small := simSnapshot(t, dir, "small.pickle", 2)
	big := simSnapshot(t, dir, "big.pickle", 4)
	code, js, stderr := runCLI(nil, "analyze", "--format", "json", "--top", "1000", small)
	if code != exitOK {
		t.Fatalf("analyze: exit %d %s", code, stderr)
	}
	baseline := writeTemp(t, dir, "small.json", []byte(js))
	data, err := os.ReadFile(small)
	if err != nil {
		t.Fatal(err)
	}
	diffs := map[string]*diff.Result{}
	for name, args := range map[string][]string{
		"snapshots": {small, big},
		"baseline":  {baseline, big},
		"stdin":     {"-", big},
	} {
		code, out, stderr := runCLI(data, append([]string{"diff", "--format", "json"}, args...)...)
		if code != exitOK {
			t.Fatalf("%s: exit %d %s", name, code, stderr)
		}
		var d diff.Result
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatal(err)
		}
		d.Base = result.Input{}
		diffs[name] = &d
	}
	if diff := cmp.Diff(diffs["snapshots"], diffs["baseline"]); diff != "" {
		t.Errorf("diff from the baseline JSON differs from the diff of the snapshot (-snapshot +baseline):\n%s", diff)
	}
	if diff := cmp.Diff(diffs["snapshots"], diffs["stdin"]); diff != "" {
		t.Errorf("diff from stdin differs (-file +stdin):\n%s", diff)
	}
	// The bigger batch grows activations: the peak must grow.
	d := diffs["snapshots"]
	if len(d.Devices) != 1 || d.Devices[0].PeakAllocated.Delta <= 0 || d.Devices[0].Categories[result.Activation].Peak.Delta <= 0 {
		t.Errorf("batch 2 → 4: %+v", d.Devices)
	}
	// And the peak delta is the difference of the two analyses' peaks.
	_, bigJS, _ := runCLI(nil, "analyze", "--format", "json", big)
	var a, b result.Result
	if json.Unmarshal([]byte(js), &a) != nil || json.Unmarshal([]byte(bigJS), &b) != nil {
		t.Fatal("analyze JSON unreadable")
	}
	if got, want := d.Devices[0].PeakAllocated, diff.NewDelta(a.Devices[0].Peak.AllocatedBytes, b.Devices[0].Peak.AllocatedBytes); got != want {
		t.Errorf("peak %+v, want %+v", got, want)
	}
}

// diffFacts are the numbers testdata/gate/diff_facts.py computes from two
// real snapshots with Python's pickle module (see its docstring for what
// is compared and how). Bytes are allocator blocks (memory_allocated()).
type diffFacts struct {
	base, new                           string
	peak, peakReserved                  diff.Delta
	end, endReserved                    diff.Delta
	optimizerPeak, zeroGradPeak         *diff.Delta // nil: no such phase in either run
	sites                               map[string]diff.Delta
	optimizerPresence, zeroGradPresence diff.Presence
}

// diffRealFacts is the output of
//
//	python3 testdata/gate/diff_facts.py BASE NEW
//
// for two pairs of related real runs: two GPT-style training steps with
// AdamW (a 13 GiB-parameter model against a 3.6 GiB one), and one model's
// training step against its inference.
var diffRealFacts = []diffFacts{
	{
		base: "kkaitlyn_ctx128_fullstep.pickle", new: "nothanmin_fullstep.pickle",
		peak:          diff.Delta{Base: 55079000576, New: 23281500672, Delta: -31797499904},
		peakReserved:  diff.Delta{Base: 61111009280, New: 23842521088, Delta: -37268488192},
		end:           diff.Delta{Base: 54873829888, New: 16019091968, Delta: -38854737920},
		endReserved:   diff.Delta{Base: 61111009280, New: 23842521088, Delta: -37268488192},
		optimizerPeak: &diff.Delta{Base: 55079000576, New: 16073617920, Delta: -39005382656},
		// kkaitlyn's zero_grad ran before the first trace entry: its peak is
		// the memory allocated before recording began (initial_allocated).
		zeroGradPeak:      &diff.Delta{Base: 13763491840, New: 23188357632, Delta: 9424865792},
		optimizerPresence: diff.InBoth, zeroGradPresence: diff.InBoth,
		sites: map[string]diff.Delta{
			"optimizers.py:82 step":        {Base: 13630744576, New: 0, Delta: -13630744576},
			"optimizers.py:84 step":        {Base: 13629696000, New: 0, Delta: -13629696000},
			"optimizers.py:100 step":       {Base: 205170688, New: 0, Delta: -205170688},
			"<allocated before recording>": {Base: 13763491840, New: 8023345664, Delta: -5740146176},
			"adapters.py:887 step":         {Base: 0, New: 3989844992, Delta: 3989844992},
			"adapters.py:888 step":         {Base: 0, New: 3989844992, Delta: 3989844992},
			"adapters.py:115 forward":      {Base: 0, New: 1509949440, Delta: 1509949440},
			"adapters.py:714 forward":      {Base: 0, New: 765460480, Delta: 765460480},
			"adapters.py:820 run_softmax":  {Base: 0, New: 754974720, Delta: 754974720},
			"transformer.py:22 forward":    {Base: 54525952, New: 0, Delta: -54525952},
		},
	},
	{
		base: "wedsonlin_medium_128_training.pickle", new: "genG_torch2.1x_wedsonlin_inference.pickle",
		peak:              diff.Delta{Base: 7026606592, New: 1738928128, Delta: -5287678464},
		peakReserved:      diff.Delta{Base: 7235174400, New: 1763704832, Delta: -5471469568},
		end:               diff.Delta{Base: 6816891392, New: 1703276544, Delta: -5113614848},
		endReserved:       diff.Delta{Base: 7235174400, New: 1763704832, Delta: -5471469568},
		optimizerPeak:     &diff.Delta{Base: 7026606592, New: 0, Delta: -7026606592},
		optimizerPresence: diff.OnlyBase,
		sites: map[string]diff.Delta{
			"<allocated before recording>": {Base: 5101219840, New: 1703276544, Delta: -3397943296},
			"optimizer.py:80 step":         {Base: 125829120, New: 0, Delta: -125829120},
			"optimizer.py:76 step":         {Base: 41943040, New: 0, Delta: -41943040},
			"model.py:532 silu":            {Base: 0, New: 16777216, Delta: 16777216},
			"model.py:39 forward":          {Base: 20480000, New: 10485760, Delta: -9994240},
			"model.py:104 forward":         {Base: 0, New: 2097152, Delta: 2097152},
		},
	},
}

// TestDiffRealSnapshots diffs real snapshots of related runs and compares
// the deltas with those computed independently in Python.
func TestDiffRealSnapshots(t *testing.T) {
	for _, f := range diffRealFacts {
		t.Run(f.base+"→"+f.new, func(t *testing.T) {
			base, new := shared(t, "snapshots", f.base), shared(t, "snapshots", f.new)
			code, out, stderr := runCLI(nil, "diff", "--format", "json", base, new)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var d diff.Result
			if err := json.Unmarshal([]byte(out), &d); err != nil {
				t.Fatal(err)
			}
			if len(d.Devices) != 1 || d.Devices[0].Device != 0 || d.Devices[0].Presence != diff.InBoth {
				t.Fatalf("devices %+v, want device 0 in both", d.Devices)
			}
			dd := d.Devices[0]
			phases := map[result.Phase]diff.PhaseDiff{}
			for _, p := range dd.Phases {
				phases[p.Phase] = p
			}
			sites := map[string]diff.Delta{}
			for _, s := range dd.Sites {
				site := s.Site
				// torchmem may split the blocks allocated before recording
				// by category ("<allocated before recording: parameter>");
				// Python has one site for them.
				if strings.HasPrefix(site, result.SiteBeforeRecording[:len(result.SiteBeforeRecording)-1]) {
					site = result.SiteBeforeRecording
				}
				v := sites[site]
				sites[site] = diff.NewDelta(v.Base+s.Bytes.Base, v.New+s.Bytes.New)
			}
			check := func(name string, got, want diff.Delta) {
				t.Helper()
				if got != want {
					t.Errorf("%s: torchmem %+v, Python %+v", name, got, want)
				}
			}
			check("peak allocated", dd.PeakAllocated, f.peak)
			check("reserved at the peak", dd.PeakReserved, f.peakReserved)
			check("allocated at the end", dd.EndAllocated, f.end)
			check("reserved at the end", dd.EndReserved, f.endReserved)
			for _, ph := range []struct {
				phase    result.Phase
				want     *diff.Delta
				presence diff.Presence
			}{{result.PhaseOptimizer, f.optimizerPeak, f.optimizerPresence}, {result.PhaseZeroGrad, f.zeroGradPeak, f.zeroGradPresence}} {
				got, ok := phases[ph.phase]
				if ph.want == nil {
					if ok {
						t.Errorf("phase %s: %+v, want none", ph.phase, got)
					}
					continue
				}
				check("phase "+string(ph.phase), got.Peak, *ph.want)
				if got.Presence != ph.presence {
					t.Errorf("phase %s presence %s, want %s", ph.phase, got.Presence, ph.presence)
				}
			}
			for site, want := range f.sites {
				check("site "+site, sites[site], want)
			}
			// The step peaks end at the overall peaks, and the categories at
			// the peak add up to the peak.
			var stepBase, stepNew int64
			for _, s := range dd.Steps {
				stepBase, stepNew = max(stepBase, s.Peak.Base), max(stepNew, s.Peak.New)
			}
			if stepBase != f.peak.Base || stepNew != f.peak.New {
				t.Errorf("highest step peaks %d, %d; want %d, %d", stepBase, stepNew, f.peak.Base, f.peak.New)
			}
			var catBase, catNew int64
			for _, c := range dd.Categories {
				catBase += c.Peak.Base
				catNew += c.Peak.New
			}
			if catBase != f.peak.Base || catNew != f.peak.New {
				t.Errorf("categories at the peak sum to %d, %d; want %d, %d", catBase, catNew, f.peak.Base, f.peak.New)
			}
		})
	}
}

// TestDiffRealSitesByUserFrame: wedsonlin's medium model at 128 and 256
// tokens runs the same code (Python's pickle finds 48 allocations at
// model.py:532 silu in each file); its peak moves from the optimizer step to
// forward, where all 48 are live. Sites are compared at forward's peak in
// both runs, and none that both runs list is called new or vanished.
func TestDiffRealSitesByUserFrame(t *testing.T) {
	base := shared(t, "snapshots", "wedsonlin_medium_128_training.pickle")
	changed := shared(t, "snapshots", "wedsonlin_medium_256_training.pickle")
	code, js, stderr := runCLI(nil, "diff", "--format", "json", base, changed)
	if code != exitOK {
		t.Fatalf("exit %d %s", code, stderr)
	}
	var d diff.Result
	if err := json.Unmarshal([]byte(js), &d); err != nil {
		t.Fatal(err)
	}
	listed := func(path string) map[string]bool {
		_, js, _ := runCLI(nil, "analyze", "--format", "json", "--top", "1000", path)
		var r result.Result
		if err := json.Unmarshal([]byte(js), &r); err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, s := range r.Devices[0].TopSites {
			m[s.Site] = true
		}
		for _, pp := range r.Devices[0].PhasePeaks {
			for _, s := range pp.TopSites {
				m[s.Site] = true
			}
		}
		return m
	}
	inBase, inNew := listed(base), listed(changed)
	dd := d.Devices[0]
	if dd.PhaseSitesAt != "the forward peak" || dd.PeakPhase.Base != "optimizer" || dd.PeakPhase.New != "forward" {
		t.Errorf("sites at %q, peak phases %+v", dd.PhaseSitesAt, dd.PeakPhase)
	}
	for _, s := range dd.Sites { // at each run's peak
		if s.Presence == diff.OnlyNew && inBase[s.Site] || s.Presence == diff.OnlyBase && inNew[s.Site] {
			t.Errorf("%s is %s but both runs list it", s.Site, s.Presence)
		}
	}
	silu := false
	for _, s := range dd.PhaseSites {
		if s.Presence == diff.OnlyNew && inBase[s.Site] || s.Presence == diff.OnlyBase && inNew[s.Site] {
			t.Errorf("%s is %s but both runs list it", s.Site, s.Presence)
		}
		if s.Site == "model.py:532 silu" {
			silu = true
			if s.Presence != diff.InBoth || s.Bytes.Base != 384<<20 || s.Bytes.New != 768<<20 || s.Count.Base != 48 || s.Count.New != 48 {
				t.Errorf("silu: %+v", s)
			}
		}
	}
	if !silu {
		t.Error("model.py:532 silu not compared")
	}
	code, text, _ := runCLI(nil, "diff", base, changed)
	if code != exitOK || !strings.Contains(text, "  sites live at the forward peak, largest changes\n") || strings.Contains(text, "\n    new ") {
		t.Errorf("exit %d\n%s", code, text)
	}
}
