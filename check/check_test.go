package check

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/diff"
	"github.com/torchmem/torchmem/internal/resulttest"
	"github.com/torchmem/torchmem/result"
)

// oomRun is checkRun with device 1 out of memory.
func oomRun() *result.Result {
	r := checkRun()
	r.Devices[1].OOM = &result.OOM{RequestedBytes: 400, DeviceFreeBytes: 10, Phase: result.PhaseForward, Site: "model.py:9 attn",
		SiteFile: "/src/model.py", SiteLine: 9, Verdict: "Out of memory in forward at model.py:9 attn: 400 B requested with 10 B free.",
		TopSites: []result.Site{{Site: "model.py:9 attn", File: "/src/model.py", Line: 9, Bytes: 30, Category: result.Activation},
			{Site: "data.py:2 load", File: "data.py", Line: 2, Bytes: 20, Category: result.InputData}}}
	return r
}

func TestCheckOOM(t *testing.T) {
	peak, _ := ParseBudget("peak=100GiB")
	cases := []struct {
		name  string
		run   *result.Result
		opts  Options
		want  []string
		first Item
	}{
		{"an OOM fails first, whatever the budgets", oomRun(), Options{Device: -1, Budgets: []Budget{peak}},
			[]string{"device 1: out of memory=fail", "device 0: peak budget=pass", "device 1: peak budget=pass"},
			Item{Name: "device 1: out of memory", Kind: "oom", Key: "oom", Device: 1, Status: CheckFail, Actual: 400, Limit: 10,
				Message: "device 1: Out of memory in forward at model.py:9 attn: 400 B requested with 10 B free.",
				File:    "/src/model.py", Line: 9,
				Sites: []CheckSite{{Site: "model.py:9 attn", File: "/src/model.py", Line: 9, Bytes: 30}, {Site: "data.py:2 load", File: "data.py", Line: 2, Bytes: 20}}}},
		{"allowed, it is skipped", oomRun(), Options{Device: -1, AllowOOM: true},
			[]string{"device 1: out of memory=skip"},
			Item{Name: "device 1: out of memory", Kind: "oom", Key: "oom", Device: 1, Status: CheckSkip, Actual: 400, Limit: 10,
				Message: "device 1 (allowed by --allow-oom): Out of memory in forward at model.py:9 attn: 400 B requested with 10 B free.",
				File:    "/src/model.py", Line: 9,
				Sites: []CheckSite{{Site: "model.py:9 attn", File: "/src/model.py", Line: 9, Bytes: 30}, {Site: "data.py:2 load", File: "data.py", Line: 2, Bytes: 20}}}},
		{"another device selected: no OOM", oomRun(), Options{Device: 0},
			[]string{"out of memory=pass"},
			Item{Name: "out of memory", Kind: "oom", Key: "oom", Device: -1, Status: CheckPass, Message: "device 0 did not run out of memory"}},
		{"no OOM on any device", checkRun(), Options{Device: -1},
			[]string{"out of memory=pass"},
			Item{Name: "out of memory", Kind: "oom", Key: "oom", Device: -1, Status: CheckPass, Message: "no device ran out of memory"}},
		{"the OOM device missing from the baseline is named", oomRun(), Options{Device: 1, Baseline: &result.Result{Devices: checkRun().Devices[:1]}},
			[]string{"device 1: out of memory=fail", "device 1: baseline=skip"},
			Item{Name: "device 1: out of memory", Kind: "oom", Key: "oom", Device: 1, Status: CheckFail, Actual: 400, Limit: 10,
				Message: "device 1: Out of memory in forward at model.py:9 attn: 400 B requested with 10 B free.",
				File:    "/src/model.py", Line: 9,
				Sites: []CheckSite{{Site: "model.py:9 attn", File: "/src/model.py", Line: 9, Bytes: 30}, {Site: "data.py:2 load", File: "data.py", Line: 2, Bytes: 20}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cr, err := Check(c.run, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, statuses(cr)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.first, cr.Checks[0]); diff != "" {
				t.Errorf("first check (-want +got):\n%s", diff)
			}
		})
	}
	cr, _ := Check(oomRun(), Options{Device: 1, Baseline: &result.Result{Devices: checkRun().Devices[:1]}})
	if got, want := cr.Checks[1].Message, "device 1 ran out of memory (see the out-of-memory check) and is not in the baseline: no regression check"; got != want {
		t.Errorf("baseline skip says %q, want %q", got, want)
	}
}

// movedPeak is a device whose overall peak is in phase peakIn, with
// forward's and the optimizer's peaks recorded (as analyze writes them).
func movedPeak(peakIn result.Phase, fwd, opt result.PhasePeak) result.DeviceResult {
	d := result.DeviceResult{Device: 0, Kind: "cuda",
		Phases:     []result.PhaseSpan{resulttest.Span(result.PhaseForward, 1, fwd.AllocatedBytes), resulttest.Span(result.PhaseOptimizer, 1, opt.AllocatedBytes)},
		PhasePeaks: []result.PhasePeak{fwd, opt}}
	pp := d.PhasePeakOf(peakIn)
	d.Peak = result.Peak{AllocatedBytes: pp.AllocatedBytes, Phase: peakIn, Step: 1, EventIndex: pp.EventIndex, Categories: pp.Categories}
	d.TopSites = pp.TopSites // no OOM: the top sites are the peak's
	return d
}

// TestCheckBaselineByPhase is the wedsonlin 128 → 256 case: the peak moves
// from the optimizer step (gradients live) to forward (activations live).
// Compared at the peak, activation grows 200× and gradient drops to 0;
// compared phase by phase, forward's activations doubled and the
// optimizer step did not change.
func TestCheckBaselineByPhase(t *testing.T) {
	silu := func(b int64) result.Site {
		return result.Site{Site: "model.py:532 silu", File: "/home/u/proj/model.py", Line: 532, Bytes: b, Category: result.Activation}
	}
	emb := func(b int64) result.Site {
		return result.Site{Site: "model.py:39 forward", File: "/home/u/proj/model.py", Line: 39, Bytes: b, Category: result.Activation}
	}
	params := result.Site{Site: "<allocated before recording: parameter>", Bytes: 1000, Category: result.Parameter}
	grads := result.Site{Site: "<backward: AccumulateGrad>", Bytes: 1000, Category: result.Gradient}
	opt := result.PhasePeak{Phase: result.PhaseOptimizer, Step: 1, EventIndex: 90, AllocatedBytes: 2030,
		Categories: result.Categories{result.Parameter: 1000, result.Gradient: 1000, result.Activation: 30}, TopSites: []result.Site{params, grads, emb(30)}}
	baseFwd := result.PhasePeak{Phase: result.PhaseForward, Step: 1, EventIndex: 10, AllocatedBytes: 1630,
		Categories: result.Categories{result.Parameter: 1000, result.Activation: 630}, TopSites: []result.Site{params, silu(400), emb(230)}}
	newFwd := result.PhasePeak{Phase: result.PhaseForward, Step: 1, EventIndex: 10, AllocatedBytes: 2260,
		Categories: result.Categories{result.Parameter: 1000, result.Activation: 1260}, TopSites: []result.Site{params, silu(800), emb(460)}}
	base := &result.Result{AllocatedUnit: result.AllocatedUnit, Devices: []result.DeviceResult{movedPeak(result.PhaseOptimizer, baseFwd, opt)}}
	run := &result.Result{AllocatedUnit: result.AllocatedUnit, Devices: []result.DeviceResult{movedPeak(result.PhaseForward, newFwd, opt)}}

	cr, err := Check(run, Options{Device: -1, Baseline: base, Tolerance: Tolerance{Percent: 5}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"out of memory=pass",
		"device 0: peak vs baseline=fail",
		"device 0: phase:forward vs baseline=fail", "device 0: phase:forward:parameter vs baseline=pass",
		"device 0: phase:forward:activation vs baseline=fail",
		"device 0: phase:optimizer vs baseline=pass", "device 0: phase:optimizer:parameter vs baseline=pass",
		"device 0: phase:optimizer:gradient vs baseline=pass", "device 0: phase:optimizer:activation vs baseline=pass"}
	if diff := cmp.Diff(want, statuses(cr)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	byName := map[string]Item{}
	for _, it := range cr.Checks {
		byName[it.Name] = it
	}
	act := byName["device 0: phase:forward:activation vs baseline"]
	if act.Message != "device 0: activation at the forward peak grew vs the baseline: 630 B → 1.23 KiB (+100.0%), more than the 5% tolerance (at most 661 B)" {
		t.Errorf("message %q", act.Message)
	}
	b400, b230 := int64(400), int64(230)
	wantSites := []CheckSite{{Site: "model.py:532 silu", File: "/home/u/proj/model.py", Line: 532, Bytes: 800, Baseline: &b400},
		{Site: "model.py:39 forward", File: "/home/u/proj/model.py", Line: 39, Bytes: 460, Baseline: &b230}}
	if diff := cmp.Diff(wantSites, act.Sites); diff != "" {
		t.Errorf("sites of the forward activation check (-want +got):\n%s", diff)
	}
	if got := act.Sites[0].Describe(); got != "model.py:532 silu 400 B → 800 B (+400 B)" {
		t.Errorf("Describe: %q", got)
	}
	// The overall peak (optimizer 2030 → forward 2260) is compared as before;
	// its sites are those at each run's peak: forward's sites grew from 0.
	pk := byName["device 0: peak vs baseline"]
	if len(pk.Sites) != 2 || pk.Sites[0].Site != "model.py:532 silu" || *pk.Sites[0].Baseline != 0 || pk.Sites[1].Site != "model.py:39 forward" || *pk.Sites[1].Baseline != 30 {
		t.Errorf("peak sites %+v", pk.Sites)
	}
	// Passing checks name no sites.
	if s := byName["device 0: phase:optimizer vs baseline"].Sites; s != nil {
		t.Errorf("a passing check names sites: %+v", s)
	}
}

func TestBudgetSites(t *testing.T) {
	d := movedPeak(result.PhaseForward,
		result.PhasePeak{Phase: result.PhaseForward, EventIndex: 10, AllocatedBytes: 60, Categories: result.Categories{result.Activation: 50, result.Parameter: 10},
			TopSites: []result.Site{{Site: "a.py:1 f", Bytes: 40, Category: result.Activation}, {Site: "p", Bytes: 10, Category: result.Parameter}, {Site: "b.py:2 g", Bytes: 10, Category: result.Activation}}},
		result.PhasePeak{Phase: result.PhaseOptimizer, EventIndex: 20, AllocatedBytes: 30, TopSites: []result.Site{{Site: "o.py:1 step", Bytes: 20, Category: result.OptimizerState}}})
	cases := []struct {
		key  string
		want []string
	}{
		{"peak", []string{"a.py:1 f", "p", "b.py:2 g"}},
		{"activation", []string{"a.py:1 f", "b.py:2 g"}},
		{"phase:optimizer", []string{"o.py:1 step"}},
		{"phase:zero_grad", nil},
		{"end", nil},
		{"leaks", nil},
	}
	for _, c := range cases {
		var got []string
		for _, s := range budgetSites(&d, c.key) {
			got = append(got, s.Site)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.key, diff)
		}
	}
}

// TestCheckMatchesSitesLikeDiff: the sites a failed check names are
// matched across the runs as diff matches them — by name, else the same
// file and function when exactly one site of each run has them (the code
// moved to another line) — and check says so ("was …").
func TestCheckMatchesSitesLikeDiff(t *testing.T) {
	site := func(name string, b int64) result.Site {
		return result.Site{Site: name, Bytes: b, Category: result.Activation}
	}
	dev := func(top []result.Site, elsewhere ...result.Site) result.DeviceResult {
		var peak int64
		for _, s := range top {
			peak += s.Bytes
		}
		d := result.DeviceResult{Device: 0, Kind: "cuda", Peak: result.Peak{AllocatedBytes: peak, Phase: result.PhaseForward, Categories: result.Categories{result.Activation: peak}},
			TopSites: top}
		if len(elsewhere) > 0 { // listed at another phase's peak only
			d.PhasePeaks = []result.PhasePeak{{Phase: result.PhaseBackward, TopSites: elsewhere}}
		}
		return d
	}
	type named struct {
		site, was string
		base      int64
	}
	cases := []struct {
		name      string
		base, new result.DeviceResult
		want      []named
	}{
		{"same line", dev([]result.Site{site("model.py:39 forward", 300)}), dev([]result.Site{site("model.py:39 forward", 700)}),
			[]named{{"model.py:39 forward", "", 300}}},
		{"moved to another line", dev([]result.Site{site("model.py:39 forward", 300)}), dev([]result.Site{site("model.py:41 forward", 700)}),
			[]named{{"model.py:41 forward", "model.py:39 forward", 300}}},
		{"two candidates: not matched", dev([]result.Site{site("model.py:39 forward", 300)}),
			dev([]result.Site{site("model.py:41 forward", 400), site("model.py:45 forward", 350)}),
			[]named{{"model.py:41 forward", "", 0}, {"model.py:45 forward", "", 0}}},
		{"another function: not matched", dev([]result.Site{site("model.py:39 forward", 300)}), dev([]result.Site{site("model.py:41 attention", 700)}),
			[]named{{"model.py:41 attention", "", 0}}},
		{"the old line still listed: not moved", dev([]result.Site{site("model.py:39 forward", 300)}),
			dev([]result.Site{site("model.py:41 forward", 700)}, site("model.py:39 forward", 5)),
			[]named{{"model.py:41 forward", "", 0}}},
		{"frames of no file: by name only", dev([]result.Site{site("<backward: MmBackward0>", 300)}), dev([]result.Site{site("<backward: BmmBackward0>", 700)}),
			[]named{{"<backward: BmmBackward0>", "", 0}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := &result.Result{AllocatedUnit: result.AllocatedUnit, Devices: []result.DeviceResult{c.base}}
			run := &result.Result{AllocatedUnit: result.AllocatedUnit, Devices: []result.DeviceResult{c.new}}
			cr, err := Check(run, Options{Device: -1, Baseline: base})
			if err != nil {
				t.Fatal(err)
			}
			peak := cr.Checks[1]
			if peak.Key != BudgetPeak || peak.Status != CheckFail {
				t.Fatalf("peak check %+v", peak)
			}
			var got []named
			for _, s := range peak.Sites {
				got = append(got, named{s.Site, s.BaselineSite, *s.Baseline})
			}
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(named{})); diff != "" {
				t.Errorf("check's sites (-want +got):\n%s", diff)
			}
			// diff names every one of them the same way.
			bySite := map[string]diff.SiteDiff{}
			for _, sd := range diff.Diff(base, run).Devices[0].Sites {
				bySite[sd.Site] = sd
			}
			for _, s := range peak.Sites {
				sd, ok := bySite[s.Site]
				if !ok || sd.BaseSite != s.BaselineSite || sd.Bytes.Base != *s.Baseline || sd.Bytes.New != s.Bytes {
					t.Errorf("check says %s, diff %+v", s.Describe(), sd)
				}
			}
			if c.want[0].was != "" {
				if got, want := peak.Sites[0].Describe(), c.want[0].site+" (was "+c.want[0].was+") 300 B → 700 B (+400 B)"; got != want {
					t.Errorf("Describe %q, want %q", got, want)
				}
			}
		})
	}
}
