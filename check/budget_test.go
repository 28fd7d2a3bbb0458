package check

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/internal/resulttest"
	"github.com/torchmem/torchmem/result"
)

func TestParseBudget(t *testing.T) {
	cases := []struct {
		in      string
		want    Budget
		wantErr string
	}{
		{"peak=20GiB", Budget{"peak", 20 << 30}, ""},
		{"peak = 1.5 GiB", Budget{"peak", 3 << 29}, ""},
		{"end=512MB", Budget{"end", 512e6}, ""},
		{"activation=8GiB", Budget{"activation", 8 << 30}, ""},
		{"optimizer_state=0", Budget{"optimizer_state", 0}, ""},
		{"phase:forward=12GiB", Budget{"phase:forward", 12 << 30}, ""},
		{"phase:zero_grad=1KiB", Budget{"phase:zero_grad", 1024}, ""},
		{"growth_per_step=0", Budget{"growth_per_step", 0}, ""},
		{"growth_per_step=10MiB", Budget{"growth_per_step", 10 << 20}, ""},
		{"leaks=0", Budget{"leaks", 0}, ""},
		{"leaks=3", Budget{"leaks", 3}, ""},
		{"peak", Budget{}, "want KEY=VALUE"},
		{"pea=1GiB", Budget{}, `unknown budget "pea"`},
		{"phase:lunch=1GiB", Budget{}, `unknown budget "phase:lunch"`},
		{"activations=1GiB", Budget{}, `unknown budget "activations"`},
		{"peak=20 jiggabytes", Budget{}, "want a size like 20GiB"},
		{"peak=-1GiB", Budget{}, "negative"},
		{"peak=", Budget{}, "want a size"},
		{"peak=99999999999EiB", Budget{}, "want a size"},
		{"leaks=1.5", Budget{}, "want a count"},
		{"leaks=-1", Budget{}, "want a count"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseBudget(c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one with %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("%+v %v, want %+v", got, err, c.want)
			}
		})
	}
}

func TestParseTolerance(t *testing.T) {
	cases := []struct {
		in      string
		want    Tolerance
		str     string
		wantErr bool
	}{
		{"5%", Tolerance{Percent: 5}, "5%", false},
		{" 2.5 % ", Tolerance{Percent: 2.5}, "2.5%", false},
		{"5", Tolerance{Percent: 5}, "5%", false},
		{"0", Tolerance{}, "0%", false},
		{"256MiB", Tolerance{Bytes: 256 << 20}, "256 MiB", false},
		{"1000%", Tolerance{Percent: 1000}, "1000%", false},
		{"0.125%", Tolerance{Percent: 0.125}, "0.125%", false},
		{"1e-300%", Tolerance{Percent: 1e-300}, "1e-300%", false}, // was printed with 300 zeros
		{"1PiB", Tolerance{Bytes: 1 << 50}, "1.00 PiB", false},
		{"1000.5%", Tolerance{}, "", true},
		{"1e308%", Tolerance{}, "", true}, // was accepted, printed as a 309-digit number
		{"1e400", Tolerance{}, "", true},
		{"Inf", Tolerance{}, "", true},
		{"2PiB", Tolerance{}, "", true},
		{"-5%", Tolerance{}, "", true},
		{"NaN", Tolerance{}, "", true},
		{"five%", Tolerance{}, "", true},
		{"lots", Tolerance{}, "", true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseTolerance(c.in)
			if (err != nil) != c.wantErr {
				t.Fatalf("error %v, want error %v", err, c.wantErr)
			}
			if c.wantErr {
				return
			}
			if got != c.want || got.String() != c.str {
				t.Errorf("%+v %q, want %+v %q", got, got.String(), c.want, c.str)
			}
		})
	}
}

func TestToleranceAllowed(t *testing.T) {
	cases := []struct {
		tol  Tolerance
		base int64
		want int64
	}{
		{Tolerance{Percent: 5}, 1000, 1050},
		{Tolerance{Percent: 5}, 1001, 1051}, // floor of 50.05
		{Tolerance{}, 1000, 1000},
		{Tolerance{Percent: 5}, 0, 0},
		{Tolerance{Bytes: 10}, 0, 10},
		{Tolerance{Bytes: 10}, math.MaxInt64 - 1, math.MaxInt64},
		{Tolerance{Percent: 1e300}, 10, math.MaxInt64},
	}
	for _, c := range cases {
		if got := c.tol.Allowed(c.base); got != c.want {
			t.Errorf("%+v.Allowed(%d) = %d, want %d", c.tol, c.base, got, c.want)
		}
	}
}

// checkRun is a run of two devices for Check tests.
func checkRun() *result.Result {
	d0 := resulttest.Device(0, 1000, 400, result.Categories{result.Parameter: 300, result.Activation: 700},
		[]result.PhaseSpan{resulttest.Span(result.PhaseForward, 1, 900), resulttest.Span(result.PhaseBackward, 1, 1000), resulttest.Span(result.PhaseForward, 2, 950)},
		[]result.Site{{Site: "<allocated before recording: parameter>", Bytes: 300, Count: 3, Category: result.Parameter},
			{Site: "model.py:3 forward", File: "/src/model.py", Line: 3, Bytes: 700, Count: 7, Category: result.Activation}})
	d1 := resulttest.Device(1, 50, 50, result.Categories{result.Parameter: 50}, []result.PhaseSpan{resulttest.Span(result.PhaseForward, 1, 50)}, nil)
	return &result.Result{AllocatedUnit: result.AllocatedUnit, Input: result.Input{Path: "run.pickle"}, Devices: []result.DeviceResult{d0, d1}, Leaks: []result.Leak{
		{Kind: "growing_list", Device: 0, Site: "train.py:9 <module>", BytesPerStep: 64, Confidence: result.Medium},
		{Kind: "step_growth", Device: 0, Site: "a.py:1 f", BytesPerStep: 128, Confidence: result.Low},
		{Kind: "step_growth", Device: 1, Site: "b.py:1 f", BytesPerStep: 8, Confidence: result.Low},
	}}
}

// statuses lists "name=status" for every check.
func statuses(c *Result) []string {
	var out []string
	for _, it := range c.Checks {
		out = append(out, it.Name+"="+string(it.Status))
	}
	return out
}

func TestCheckBudgets(t *testing.T) {
	cases := []struct {
		name    string
		budgets []string
		device  int
		want    []string
	}{
		{"peak pass and fail per device", []string{"peak=100"}, -1, []string{"device 0: peak budget=fail", "device 1: peak budget=pass"}},
		{"exact limit passes", []string{"peak=1000"}, 0, []string{"device 0: peak budget=pass"}},
		{"end", []string{"end=399"}, 0, []string{"device 0: end budget=fail"}},
		{"category at peak", []string{"activation=700", "parameter=299"}, 0, []string{"device 0: parameter budget=fail", "device 0: activation budget=pass"}},
		{"empty category", []string{"temporary=0"}, 0, []string{"device 0: temporary budget=pass"}},
		{"phase max over steps", []string{"phase:forward=949"}, 0, []string{"device 0: phase:forward budget=fail"}},
		{"absent phase is skipped", []string{"phase:optimizer=1"}, 0, []string{"device 0: phase:optimizer budget=skip"}},
		{"growth per step takes the largest leak", []string{"growth_per_step=127"}, -1, []string{"device 0: growth_per_step budget=fail", "device 1: growth_per_step budget=pass"}},
		{"growth per step at the limit", []string{"growth_per_step=128"}, 0, []string{"device 0: growth_per_step budget=pass"}},
		{"leaks counts medium and high only", []string{"leaks=0"}, -1, []string{"device 0: leaks budget=fail", "device 1: leaks budget=pass"}},
		{"leaks within", []string{"leaks=1"}, 0, []string{"device 0: leaks budget=pass"}},
		{"canonical order, last of a key wins", []string{"leaks=5", "peak=1", "peak=5000"}, 0, []string{"device 0: peak budget=pass", "device 0: leaks budget=pass"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var bs []Budget
			for _, s := range c.budgets {
				b, err := ParseBudget(s)
				if err != nil {
					t.Fatal(err)
				}
				bs = append(bs, b)
			}
			cr, err := Check(checkRun(), Options{Budgets: bs, Device: c.device})
			if err != nil {
				t.Fatal(err)
			}
			want := append([]string{"out of memory=pass"}, c.want...) // the OOM check comes first
			if diff := cmp.Diff(want, statuses(cr)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if cr.Passed+cr.Failed+cr.Skipped != len(cr.Checks) || cr.OK() != (cr.Failed == 0) {
				t.Errorf("counts %d+%d+%d of %d", cr.Passed, cr.Failed, cr.Skipped, len(cr.Checks))
			}
		})
	}
}

func TestCheckMessages(t *testing.T) {
	b, _ := ParseBudget("peak=900")
	l, _ := ParseBudget("leaks=0")
	cr, err := Check(checkRun(), Options{Budgets: []Budget{b, l}, Device: 0})
	if err != nil {
		t.Fatal(err)
	}
	want := []Item{
		{Name: "out of memory", Kind: "oom", Key: "oom", Device: -1, Status: CheckPass, Message: "device 0 did not run out of memory"},
		{Name: "device 0: peak budget", Kind: "budget", Key: "peak", Device: 0, Status: CheckFail, Actual: 1000, Limit: 900,
			Message: "device 0: peak allocated 1000 B (in forward, step 1) is over the budget of 900 B by 100 B",
			Sites:   []CheckSite{{Site: "model.py:3 forward", File: "/src/model.py", Line: 3, Bytes: 700}, {Site: "<allocated before recording: parameter>", Bytes: 300}}},
		{Name: "device 0: leaks budget", Kind: "budget", Key: "leaks", Device: 0, Status: CheckFail, Actual: 1, Limit: 0,
			Message: "device 0: 1 medium/high-confidence leak (growing_list at train.py:9 <module>), more than the budget of 0"},
	}
	if diff := cmp.Diff(want, cr.Checks); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCheckBaseline(t *testing.T) {
	base := checkRun()
	grown := checkRun()
	grown.Devices[0].Peak.AllocatedBytes = 1040                   // +4%
	grown.Devices[0].Peak.Categories[result.Activation] = 800     // +14%
	grown.Devices[0].Peak.Categories[result.Temporary] = 1        // was 0
	grown.Devices[0].Phases = append(grown.Devices[0].Phases[:2], // forward 950 → 900 (the step-2 span dropped)
		resulttest.Span(result.PhaseOptimizer, 1, 10))
	grown.Devices = grown.Devices[:1]
	base.Devices[1].Device = 7 // only in the baseline: not checked

	cases := []struct {
		name string
		run  *result.Result
		tol  Tolerance
		dev  int
		want []string
	}{
		// Analyses without phase peaks (older baselines): categories are
		// compared in the phase of both runs' peak (forward) only.
		{"identical passes at 0%", checkRun(), Tolerance{}, 0, []string{"out of memory=pass",
			"device 0: peak vs baseline=pass", "device 0: phase:forward vs baseline=pass", "device 0: phase:forward:parameter vs baseline=pass",
			"device 0: phase:forward:activation vs baseline=pass", "device 0: phase:backward vs baseline=pass",
			"device 0: categories by phase vs baseline=skip"}},
		{"5% tolerance", grown, Tolerance{Percent: 5}, -1, []string{"out of memory=pass",
			"device 0: peak vs baseline=pass", "device 0: phase:forward vs baseline=pass", "device 0: phase:forward:parameter vs baseline=pass",
			"device 0: phase:forward:activation vs baseline=fail", "device 0: phase:forward:temporary vs baseline=fail",
			"device 0: phase:backward vs baseline=pass", "device 0: phase:optimizer vs baseline=skip", "device 0: categories by phase vs baseline=skip"}},
		{"3% tolerance", grown, Tolerance{Percent: 3}, 0, []string{"out of memory=pass",
			"device 0: peak vs baseline=fail", "device 0: phase:forward vs baseline=pass", "device 0: phase:forward:parameter vs baseline=pass",
			"device 0: phase:forward:activation vs baseline=fail", "device 0: phase:forward:temporary vs baseline=fail",
			"device 0: phase:backward vs baseline=pass", "device 0: phase:optimizer vs baseline=skip", "device 0: categories by phase vs baseline=skip"}},
		{"absolute tolerance", grown, Tolerance{Bytes: 100}, 0, []string{"out of memory=pass",
			"device 0: peak vs baseline=pass", "device 0: phase:forward vs baseline=pass", "device 0: phase:forward:parameter vs baseline=pass",
			"device 0: phase:forward:activation vs baseline=pass", "device 0: phase:forward:temporary vs baseline=pass",
			"device 0: phase:backward vs baseline=pass", "device 0: phase:optimizer vs baseline=skip", "device 0: categories by phase vs baseline=skip"}},
		{"device missing from the baseline", checkRun(), Tolerance{}, 1, []string{"out of memory=pass", "device 1: baseline=skip"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cr, err := Check(c.run, Options{Baseline: base, BaselinePath: "base.json", Tolerance: c.tol, Device: c.dev})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, statuses(cr)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if cr.Baseline == nil || cr.Baseline.Path != "base.json" || cr.Tolerance == nil || *cr.Tolerance != c.tol {
				t.Errorf("baseline %+v tolerance %+v", cr.Baseline, cr.Tolerance)
			}
		})
	}
}

func TestCheckRegressionMessage(t *testing.T) {
	got := regression(0, "peak", 100, 110, Tolerance{Percent: 5}, 0)
	b := int64(100)
	want := Item{Name: "device 0: peak vs baseline", Kind: "regression", Key: "peak", Device: 0, Status: CheckFail,
		Actual: 110, Limit: 105, Baseline: &b,
		Message: "device 0: peak allocated grew vs the baseline: 100 B → 110 B (+10.0%), more than the 5% tolerance (at most 105 B)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestRegressionNoiseFloor: growth fails only past both the tolerance and
// the floor; the message says which let it pass.
func TestRegressionNoiseFloor(t *testing.T) {
	const KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
	cases := []struct {
		name      string
		base, cur int64
		tol       Tolerance
		floor     int64
		status    Status
		limit     int64
		message   string
	}{
		{"80 KiB doubled, under the floor", 80 * KiB, 160 * KiB, Tolerance{}, 16 * MiB, CheckPass, 80*KiB + 16*MiB,
			"device 0: temporary at the peak vs the baseline: 80.0 KiB → 160 KiB (+100.0%), under the 16.0 MiB noise floor"},
		{"80 KiB doubled, no floor", 80 * KiB, 160 * KiB, Tolerance{}, 0, CheckFail, 80 * KiB,
			"device 0: temporary at the peak grew vs the baseline: 80.0 KiB → 160 KiB (+100.0%), more than the 0% tolerance (at most 80.0 KiB)"},
		{"1 GiB +20%, over the floor", GiB, GiB + GiB/5, Tolerance{}, 16 * MiB, CheckFail, GiB + 16*MiB,
			"device 0: temporary at the peak grew vs the baseline: 1.00 GiB → 1.20 GiB (+20.0%), more than the 0% tolerance and the 16.0 MiB noise floor (at most 1.02 GiB)"},
		{"1 GiB +20%, within the tolerance", GiB, GiB + GiB/5, Tolerance{Percent: 25}, 16 * MiB, CheckPass, GiB + GiB/4,
			"device 0: temporary at the peak vs the baseline: 1.00 GiB → 1.20 GiB (+20.0%), within the 25% tolerance"},
		{"exactly at the floor", GiB, GiB + 16*MiB, Tolerance{}, 16 * MiB, CheckPass, GiB + 16*MiB,
			"device 0: temporary at the peak vs the baseline: 1.00 GiB → 1.02 GiB (+1.6%), under the 16.0 MiB noise floor"},
		{"one byte over the floor", GiB, GiB + 16*MiB + 1, Tolerance{}, 16 * MiB, CheckFail, GiB + 16*MiB,
			"device 0: temporary at the peak grew vs the baseline: 1.00 GiB → 1.02 GiB (+1.6%), more than the 0% tolerance and the 16.0 MiB noise floor (at most 1.02 GiB)"},
		{"shrank", GiB, GiB / 2, Tolerance{}, 16 * MiB, CheckPass, GiB + 16*MiB,
			"device 0: temporary at the peak vs the baseline: 1.00 GiB → 512 MiB (-50.0%), within the 0% tolerance"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := regression(0, "temporary", c.base, c.cur, c.tol, c.floor)
			if got.Status != c.status || got.Limit != c.limit || got.NoiseFloor != c.floor || got.Message != c.message {
				t.Errorf("%s, limit %d, floor %d: %q; want %s, %d: %q", got.Status, got.Limit, got.NoiseFloor, got.Message, c.status, c.limit, c.message)
			}
		})
	}
}

func TestParseFloor(t *testing.T) {
	cases := []struct {
		in      string
		want    Floor
		str     string
		of10GiB int64
		wantErr string
	}{
		{"16MiB,1%", Floor{Bytes: 16 << 20, PercentOfPeak: 1}, "the larger of 16.0 MiB and 1% of the baseline's peak", 107374182, ""},
		{" 1% , 512MiB ", Floor{Bytes: 512 << 20, PercentOfPeak: 1}, "the larger of 512 MiB and 1% of the baseline's peak", 512 << 20, ""},
		{"64MiB", Floor{Bytes: 64 << 20}, "64.0 MiB", 64 << 20, ""},
		{"2.5%", Floor{PercentOfPeak: 2.5}, "2.5% of the baseline's peak", 268435456, ""},
		{"0", Floor{}, "0 B", 0, ""},
		{"100%", Floor{PercentOfPeak: 100}, "100% of the baseline's peak", 10 << 30, ""},
		{"101%", Floor{}, "", 0, "from 0% to 100%"},
		{"-1%", Floor{}, "", 0, "from 0% to 100%"},
		{"NaN%", Floor{}, "", 0, "from 0% to 100%"},
		{"2PiB", Floor{}, "", 0, "at most 1 PiB"},
		{"1MiB,2MiB", Floor{}, "", 0, "at most one size and one percentage"},
		{"1%,2%", Floor{}, "", 0, "at most one size and one percentage"},
		{"1MiB,1%,2%", Floor{}, "", 0, "or both: 16MiB,1%"},
		{"lots", Floor{}, "", 0, "want a size like 16MiB"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseFloor(c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one with %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want || got.String() != c.str || got.Of(10<<30) != c.of10GiB {
				t.Errorf("%+v %q Of(10 GiB)=%d %v; want %+v %q %d", got, got.String(), got.Of(10<<30), err, c.want, c.str, c.of10GiB)
			}
		})
	}
	if got := DefaultFloor.Of(1 << 30); got != 16<<20 {
		t.Errorf("default floor of a 1 GiB peak: %d", got)
	}
	if got := DefaultFloor.Of(result.MaxFigureBytes); got != 11_258_999_068_426 {
		t.Errorf("default floor of the largest peak: %d", got)
	}
	if got := (Floor{PercentOfPeak: 100}).Of(math.MaxInt64); got != result.MaxFigureBytes {
		t.Errorf("a floor past the int64 range: %d", got)
	}
}

func TestCheckErrors(t *testing.T) {
	if _, err := Check(checkRun(), Options{Device: 3, Budgets: []Budget{{Key: "peak"}}}); err == nil || !strings.Contains(err.Error(), "no device 3") {
		t.Errorf("missing device: %v", err)
	}
	if _, err := Check(checkRun(), Options{Device: -1, Budgets: []Budget{{Key: "bogus"}}}); err == nil {
		t.Error("unknown budget key accepted")
	}
	cr, err := Check(&result.Result{}, Options{Device: -1, Budgets: []Budget{{Key: "peak"}}})
	if err != nil || len(cr.Checks) != 1 || cr.Checks[0].Status != CheckSkip || cr.Checks[0].Key != "peak" || !cr.OK() {
		t.Errorf("no devices: %+v %v", cr, err)
	}
}

func TestBudgetKeys(t *testing.T) {
	keys := BudgetKeys()
	want := []string{"peak", "end", "parameter", "gradient", "optimizer_state", "activation", "temporary", "autograd_detail", "input", "kv_cache", "workspace", "autocast_cache", "cuda_graph_pool", "unknown",
		"phase:data", "phase:forward", "phase:backward", "phase:zero_grad", "phase:optimizer", "phase:unknown", "growth_per_step", "leaks"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
