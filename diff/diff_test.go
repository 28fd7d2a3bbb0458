package diff

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/internal/resulttest"
	"github.com/torchmem/torchmem/result"
)

func TestDiffDevices(t *testing.T) {
	cases := []struct {
		name      string
		base, new []result.DeviceResult
		want      []Presence
		wantIDs   []int
	}{
		{"same devices", []result.DeviceResult{resulttest.Device(0, 10, 5, result.Categories{}, nil, nil)}, []result.DeviceResult{resulttest.Device(0, 12, 5, result.Categories{}, nil, nil)}, []Presence{InBoth}, []int{0}},
		{"device only in new", []result.DeviceResult{resulttest.Device(0, 10, 5, result.Categories{}, nil, nil)},
			[]result.DeviceResult{resulttest.Device(1, 3, 1, result.Categories{}, nil, nil), resulttest.Device(0, 10, 5, result.Categories{}, nil, nil)}, []Presence{InBoth, OnlyNew}, []int{0, 1}},
		{"device only in base", []result.DeviceResult{resulttest.Device(2, 10, 5, result.Categories{}, nil, nil), resulttest.Device(0, 1, 1, result.Categories{}, nil, nil)},
			[]result.DeviceResult{resulttest.Device(0, 10, 5, result.Categories{}, nil, nil)}, []Presence{InBoth, OnlyBase}, []int{0, 2}},
		{"no devices", nil, nil, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Diff(&result.Result{Devices: c.base}, &result.Result{Devices: c.new})
			var got []Presence
			var ids []int
			for _, dd := range d.Devices {
				got = append(got, dd.Presence)
				ids = append(ids, dd.Device)
			}
			if !cmp.Equal(got, c.want) || !cmp.Equal(ids, c.wantIDs) {
				t.Errorf("devices %v %v, want %v %v", ids, got, c.wantIDs, c.want)
			}
			if d.Schema != DiffSchemaID || d.Devices == nil || d.Leaks == nil {
				t.Errorf("schema %q, devices %v, leaks %v: want the schema and non-nil lists", d.Schema, d.Devices, d.Leaks)
			}
		})
	}
}

func TestDiffNumbers(t *testing.T) {
	base := &result.Result{Input: result.Input{Path: "a"}, Devices: []result.DeviceResult{resulttest.Device(0, 1000, 400, result.Categories{result.Parameter: 300, result.Activation: 700},
		[]result.PhaseSpan{resulttest.Span(result.PhaseForward, 1, 900), resulttest.Span(result.PhaseBackward, 1, 1000), resulttest.Span(result.PhaseForward, 2, 950), resulttest.Span(result.PhaseOptimizer, 2, 500)},
		[]result.Site{{Site: "model.py:1 f", Bytes: 600, Count: 2, Category: result.Activation}, {Site: "old.py:9 g", Bytes: 100, Count: 1, Category: result.Activation},
			{Site: "same.py:3 h", Bytes: 300, Count: 3, Category: result.Parameter}})}}
	nw := &result.Result{Input: result.Input{Path: "b"}, Devices: []result.DeviceResult{resulttest.Device(0, 1500, 400, result.Categories{result.Parameter: 300, result.Activation: 1200},
		[]result.PhaseSpan{resulttest.Span(result.PhaseZeroGrad, 1, 300), resulttest.Span(result.PhaseForward, 1, 1500), resulttest.Span(result.PhaseBackward, 1, 1400), resulttest.Span(result.PhaseForward, 3, 1450)},
		[]result.Site{{Site: "model.py:1 f", Bytes: 1000, Count: 3, Category: result.Activation}, {Site: "new.py:5 k", Bytes: 200, Count: 1, Category: result.Temporary},
			{Site: "same.py:3 h", Bytes: 300, Count: 3, Category: result.Parameter}})}}
	d := Diff(base, nw)
	if d.Base.Path != "a" || d.New.Path != "b" || len(d.Devices) != 1 {
		t.Fatalf("diff %+v", d)
	}
	dd := d.Devices[0]
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"peak", dd.PeakAllocated, Delta{1000, 1500, 500}},
		{"peak reserved", dd.PeakReserved, Delta{1100, 1600, 500}},
		{"end", dd.EndAllocated, Delta{400, 400, 0}},
		{"activation at peak", dd.Categories[result.Activation], CategoryDiff{result.Activation, Delta{700, 1200, 500}, Delta{}}},
		{"every category", len(dd.Categories), int(result.NumCategories)},
		{"phases", dd.Phases, []PhaseDiff{
			{result.PhaseForward, InBoth, Delta{950, 1500, 550}},
			{result.PhaseBackward, InBoth, Delta{1000, 1400, 400}},
			{result.PhaseOptimizer, OnlyBase, Delta{500, 0, -500}},
			{result.PhaseZeroGrad, OnlyNew, Delta{0, 300, 300}},
		}},
		{"steps", dd.Steps, []StepDiff{
			{1, InBoth, Delta{1000, 1500, 500}},
			{2, OnlyBase, Delta{950, 0, -950}},
			{3, OnlyNew, Delta{0, 1450, 1450}},
		}},
		{"sites", dd.Sites, []SiteDiff{
			{"model.py:1 f", InBoth, Delta{600, 1000, 400}, Delta{2, 3, 1}, result.Activation, ""},
			{"new.py:5 k", OnlyNew, Delta{0, 200, 200}, Delta{0, 1, 1}, result.Temporary, ""},
			{"old.py:9 g", OnlyBase, Delta{100, 0, -100}, Delta{1, 0, -1}, result.Activation, ""},
			{"same.py:3 h", InBoth, Delta{300, 300, 0}, Delta{3, 3, 0}, result.Parameter, ""},
		}},
		{"oom", dd.OOM, OOMDiff{Status: OOMNone}},
	}
	for _, c := range checks {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}

func TestDiffOOM(t *testing.T) {
	oom := &result.OOM{RequestedBytes: 10, DeviceFreeBytes: 2, AllocatedBytes: 90, Phase: result.PhaseBackward, Step: 3, Site: "x.py:1 f"}
	brief := &OOMBrief{RequestedBytes: 10, DeviceFreeBytes: 2, AllocatedBytes: 90, Phase: result.PhaseBackward, Step: 3, Site: "x.py:1 f"}
	cases := []struct {
		name      string
		base, new *result.OOM
		want      OOMDiff
	}{
		{"none", nil, nil, OOMDiff{Status: OOMNone}},
		{"new", nil, oom, OOMDiff{Status: OOMAdded, New: brief}},
		{"fixed", oom, nil, OOMDiff{Status: OOMFixed, Base: brief}},
		{"both", oom, oom, OOMDiff{Status: OOMBoth, Base: brief, New: brief}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, n := resulttest.Device(0, 1, 1, result.Categories{}, nil, nil), resulttest.Device(0, 1, 1, result.Categories{}, nil, nil)
			b.OOM, n.OOM = c.base, c.new
			d := Diff(&result.Result{Devices: []result.DeviceResult{b}}, &result.Result{Devices: []result.DeviceResult{n}})
			if diff := cmp.Diff(c.want, d.Devices[0].OOM); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDiffLeaks(t *testing.T) {
	base := []result.Leak{
		{Kind: "growing_list", Device: 0, Site: "train.py:9 <module>", BytesPerStep: 100, Confidence: result.High},
		{Kind: "step_growth", Device: 1, Site: "a.py:1 f", BytesPerStep: 5, Confidence: result.Low},
	}
	nw := []result.Leak{
		{Kind: "growing_list", Device: 0, Site: "train.py:9 <module>", BytesPerStep: 150, Confidence: result.Medium},
		{Kind: "retained_graph", Device: 0, Site: "eval.py:3 run", BytesPerStep: 1000, Confidence: result.High},
	}
	got := Diff(&result.Result{Leaks: base}, &result.Result{Leaks: nw}).Leaks
	want := []LeakDiff{
		{Device: 0, Kind: "retained_graph", Site: "eval.py:3 run", Presence: OnlyNew, BytesPerStep: Delta{0, 1000, 1000}, Confidence: result.High},
		{Device: 0, Kind: "growing_list", Site: "train.py:9 <module>", Presence: InBoth, BytesPerStep: Delta{100, 150, 50}, Confidence: result.Medium},
		{Device: 1, Kind: "step_growth", Site: "a.py:1 f", Presence: OnlyBase, BytesPerStep: Delta{5, 0, -5}, Confidence: result.Low},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDeltaPercent(t *testing.T) {
	cases := []struct {
		d    Delta
		want float64
		ok   bool
	}{
		{NewDelta(100, 150), 50, true},
		{NewDelta(200, 100), -50, true},
		{NewDelta(0, 10), 0, false},
		{NewDelta(0, 0), 0, false},
	}
	for _, c := range cases {
		got, ok := c.d.Percent()
		if got != c.want || ok != c.ok {
			t.Errorf("%+v: %v %v, want %v %v", c.d, got, ok, c.want, c.ok)
		}
	}
}

// TestDiffDoesNotModify guards the promise that Diff leaves its inputs alone.
func TestDiffDoesNotModify(t *testing.T) {
	mk := func() *result.Result {
		return &result.Result{Devices: []result.DeviceResult{resulttest.Device(0, 10, 5, result.Categories{result.Activation: 10},
			[]result.PhaseSpan{resulttest.Span(result.PhaseForward, 1, 10)}, []result.Site{{Site: "b", Bytes: 1}, {Site: "a", Bytes: 9}})},
			Leaks: []result.Leak{{Kind: "k", Site: "s", BytesPerStep: 1}}}
	}
	b, n := mk(), mk()
	Diff(b, n)
	if diff := cmp.Diff(mk(), b); diff != "" {
		t.Errorf("base modified:\n%s", diff)
	}
}

// TestDiffSitesByUserFrame: sites are compared at the same phase's peak in
// both runs, a site the other run lists anywhere is neither new nor
// vanished, and a site whose code moved to another line is matched by its
// file and function.
func TestDiffSitesByUserFrame(t *testing.T) {
	site := func(name string, b int64) result.Site {
		return result.Site{Site: name, Bytes: b, Count: 1, Category: result.Activation}
	}
	base := result.DeviceResult{Device: 0, Peak: result.Peak{Phase: result.PhaseOptimizer},
		TopSites: []result.Site{site("optim.py:80 step", 100), site("grad", 500)},
		PhasePeaks: []result.PhasePeak{
			{Phase: result.PhaseForward, TopSites: []result.Site{site("model.py:532 silu", 384), site("model.py:39 forward", 400), site("model.py:60 mlp", 10)}},
			{Phase: result.PhaseOptimizer, TopSites: []result.Site{site("optim.py:80 step", 100), site("grad", 500)}},
		}}
	run := result.DeviceResult{Device: 0, Peak: result.Peak{Phase: result.PhaseForward},
		TopSites: []result.Site{site("model.py:532 silu", 768), site("model.py:41 forward", 800), site("model.py:77 attn", 50)},
		PhasePeaks: []result.PhasePeak{
			{Phase: result.PhaseForward, TopSites: []result.Site{site("model.py:532 silu", 768), site("model.py:41 forward", 800), site("model.py:77 attn", 50)}},
			{Phase: result.PhaseOptimizer, TopSites: []result.Site{site("optim.py:80 step", 100)}},
		}}
	dd := diffDevice(0, &base, &run)
	if dd.PhaseSitesAt != "the forward peak" {
		t.Errorf("sites at %q", dd.PhaseSitesAt)
	}
	want := []SiteDiff{
		{"model.py:41 forward", InBoth, Delta{400, 800, 400}, Delta{1, 1, 0}, result.Activation, "model.py:39 forward"},
		{"model.py:532 silu", InBoth, Delta{384, 768, 384}, Delta{1, 1, 0}, result.Activation, ""},
		{"model.py:77 attn", OnlyNew, Delta{0, 50, 50}, Delta{0, 1, 1}, result.Activation, ""},
		{"model.py:60 mlp", OnlyBase, Delta{10, 0, -10}, Delta{1, 0, -1}, result.Activation, ""},
	}
	if diff := cmp.Diff(want, dd.PhaseSites); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// At each run's peak (Sites), the optimizer step's sites against
	// forward's: sites live at one peak only but listed in the other run
	// are neither new nor vanished.
	wantPeak := []SiteDiff{
		{"model.py:41 forward", InBoth, Delta{0, 800, 800}, Delta{0, 1, 1}, result.Activation, "model.py:39 forward"},
		{"model.py:532 silu", InBoth, Delta{0, 768, 768}, Delta{0, 1, 1}, result.Activation, ""},
		{"grad", OnlyBase, Delta{500, 0, -500}, Delta{1, 0, -1}, result.Activation, ""},
		{"optim.py:80 step", InBoth, Delta{100, 0, -100}, Delta{1, 0, -1}, result.Activation, ""},
		{"model.py:77 attn", OnlyNew, Delta{0, 50, 50}, Delta{0, 1, 1}, result.Activation, ""},
	}
	if diff := cmp.Diff(wantPeak, dd.Sites); diff != "" {
		t.Errorf("at the peaks (-want +got):\n%s", diff)
	}
	// Without phase peaks, no phase sites; a site live at one peak only
	// but listed in the other run is not new.
	base.PhasePeaks, run.PhasePeaks = nil, nil
	base.TopSites = append(base.TopSites, site("model.py:532 silu", 0))
	dd = diffDevice(0, &base, &run)
	for _, s := range dd.Sites {
		if s.Site == "model.py:532 silu" && s.Presence != InBoth || s.Site == "grad" && s.Presence != OnlyBase {
			t.Errorf("%+v", s)
		}
	}
	if dd.PhaseSites != nil || dd.PhaseSitesAt != "" {
		t.Errorf("phase sites without phase peaks: %q %+v", dd.PhaseSitesAt, dd.PhaseSites)
	}
}
