package analysis

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

func maxInt(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// chromeTrace builds a small Kineto trace: two ProfilerSteps, each with
// zero_grad, a "## forward ##" range on the main thread, autograd
// evaluate_function spans on the autograd thread, and an SGD-with-momentum
// step; [memory] events carry Total Allocated/Reserved.
type traceBuilder struct {
	events []string
	ta     int64
}

func (b *traceBuilder) span(name, cat string, tid int, ts, dur int64) {
	b.events = append(b.events, fmt.Sprintf(`{"ph":"X","cat":%q,"name":%q,"pid":1,"tid":%d,"ts":%d,"dur":%d,"args":{}}`, cat, name, tid, ts, dur))
}

func (b *traceBuilder) mem(tid int, ts int64, addr uint64, bytes int64) {
	b.ta += bytes
	b.events = append(b.events, fmt.Sprintf(`{"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":1,"tid":%d,"ts":%d,"args":{"Device Type":1,"Device Id":0,"Addr":%d,"Bytes":%d,"Total Allocated":%d,"Total Reserved":%d}}`, tid, ts, addr, bytes, b.ta, 64*mib))
}

func TestFixtureChromeTrace(t *testing.T) {
	const baseline = 10 * mib
	b := &traceBuilder{ta: baseline}
	const main, bw = 1, 2
	b.events = append(b.events, `{"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"thread 2 (pt_autograd_0)"}}`)
	var grad uint64
	for step := int64(1); step <= 2; step++ {
		t0 := step * 10000
		b.span(fmt.Sprintf("ProfilerStep#%d", step), "user_annotation", main, t0, 9000)
		b.span("Optimizer.zero_grad#SGD.zero_grad", "user_annotation", main, t0+100, 100)
		if grad != 0 {
			b.mem(main, t0+150, grad, -mib/2) // set_to_none frees last step's gradient
		}
		b.span("## forward ##", "user_annotation", main, t0+1000, 2000)
		act := 0x10000 + uint64(step)*0x1000000
		b.mem(main, t0+1100, act, 4*mib) // saved for backward
		b.mem(main, t0+1200, act+0x400000, mib)
		b.mem(main, t0+1300, act+0x400000, -mib) // transient
		b.span("aten::mm", "cpu_op", main, t0+1500, 100)
		b.mem(main, t0+1510, act+0xc00000, mib) // an intermediate of one op
		b.mem(main, t0+1520, act+0xc00000, -mib)
		if step == 1 {
			b.mem(main, t0+1400, 0x999000, -2048) // allocated before the trace
		}
		b.span("autograd::engine::evaluate_function: AddmmBackward0", "cpu_op", bw, t0+4000, 2000)
		grad = 0x20000 + uint64(step)*0x1000000
		b.mem(bw, t0+4100, grad, mib/2)
		b.mem(bw, t0+4200, act+0x800000, 2*mib) // backward scratch
		b.mem(bw, t0+4300, act+0x800000, -2*mib)
		b.mem(bw, t0+4400, act, -4*mib)
		b.span("Optimizer.step#SGD.step", "user_annotation", main, t0+7000, 1000)
		if step == 1 {
			b.mem(main, t0+7100, 0x30000, mib/2) // momentum buffer, created once
		}
	}
	data := `{"schemaVersion":1,"traceEvents":[` + strings.Join(b.events, ",\n") + `]}`
	snap, err := load.Read(strings.NewReader(data), "fixture.json", int64(len(data)), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res := Analyze(snap, DefaultOptions())
	if len(res.Devices) != 1 {
		t.Fatalf("%d devices", len(res.Devices))
	}
	d := res.Devices[0]
	// End: the untracked baseline (minus the 2 KiB freed in step 1), the
	// momentum buffer, and step 2's gradient.
	want := result.Categories{result.Gradient: mib / 2, result.OptimizerState: mib / 2, result.Unknown: baseline - 2048}
	if d.AtEnd.Categories != want || d.AtEnd.AllocatedBytes != b.ta || d.AtEnd.ReservedBytes != 64*mib {
		t.Errorf("at end %v (%d allocated, %d reserved), want %v (%d)", d.AtEnd.Categories, d.AtEnd.AllocatedBytes, d.AtEnd.ReservedBytes, want, b.ta)
	}
	type sp struct {
		Phase  result.Phase
		Step   int
		Events int
		Peak   int64
	}
	var got []sp
	for _, p := range d.Phases {
		got = append(got, sp{p.Phase, p.Step, p.Events, p.PeakAllocatedBytes})
	}
	B := int64(baseline)
	want1 := []sp{
		{result.PhaseZeroGrad, 1, 0, B},
		{result.PhaseForward, 1, 6, B + 5*mib},
		{result.PhaseBackward, 1, 4, B - 2048 + 4*mib + mib/2 + 2*mib},
		{result.PhaseOptimizer, 1, 1, B - 2048 + mib},
		{result.PhaseZeroGrad, 2, 1, B - 2048 + mib/2}, // a span's peak is after its events
		{result.PhaseForward, 2, 5, B - 2048 + mib/2 + 5*mib},
		{result.PhaseBackward, 2, 4, B - 2048 + mib/2 + 4*mib + mib/2 + 2*mib},
		{result.PhaseOptimizer, 2, 0, B - 2048 + mib},
	}
	if diff := cmp.Diff(want1, got); diff != "" {
		t.Errorf("phase spans (-want +got):\n%s", diff)
	}
	if d.Peak.Step != 2 || d.Peak.Phase != result.PhaseBackward || d.Peak.AllocatedBytes != B-2048+mib/2+4*mib+mib/2+2*mib {
		t.Errorf("peak %+v", d.Peak)
	}
	var rules []string
	for _, u := range d.Rules {
		rules = append(rules, u.Rule)
	}
	slices.Sort(rules)
	if diff := cmp.Diff([]string{history.RuleOptimizerKept, history.RuleBackwardKept, history.RuleBaselineRest}, rules); diff != "" {
		t.Errorf("rules at end (-want +got):\n%s", diff)
	}
	h := history.Build(snap, snap.Devices[0])
	cats := map[string]result.Category{}
	for _, bl := range h.Blocks {
		cats[bl.Rule()] = bl.Category
	}
	for rule, cat := range map[string]result.Category{history.RuleSavedForBackward: result.Activation, history.RuleForwardTransient: result.Temporary, history.RuleBackwardScratch: result.AutogradDetail,
		history.RuleFreedByZeroGrad: result.Gradient, history.RulePreFreedInForward: result.Activation, history.RuleIntraOp: result.Temporary} {
		if c, ok := cats[rule]; !ok || c != cat {
			t.Errorf("rule %s: category %v (present %v), want %v", rule, c, ok, cat)
		}
	}
}

// TestFixtureTimeline checks that a thinned timeline keeps the peak and the
// OOM exact and stays within its bound.
func TestFixtureTimeline(t *testing.T) {
	r := newRig()
	s := r.s
	var live []uint64
	for i := 0; i < 6000; i++ {
		size := int64(1+i%7) * mib
		if i == 3333 {
			size = 900 * mib // the peak
		}
		live = append(live, s.Alloc(0, size, r.fwd))
		if len(live) > 3 {
			s.Free(0, live[0])
			live = live[1:]
		}
	}
	s.OOM(0, 4000*mib, mib, r.fwd)
	snap := analysistest.Read(t, s, 0)
	opts := DefaultOptions()
	opts.MaxTimelinePoints = 1000
	res := Analyze(snap, opts)
	d := res.Devices[0]
	tl := d.Timeline
	if n := len(tl.EventIndex); n > opts.MaxTimelinePoints+3 || n < opts.MaxTimelinePoints/2 {
		t.Fatalf("%d points for a bound of %d", n, opts.MaxTimelinePoints)
	}
	if tl.PeakPoint < 0 || tl.Allocated[tl.PeakPoint] != d.Peak.AllocatedBytes || tl.EventIndex[tl.PeakPoint] != d.Peak.EventIndex {
		t.Errorf("peak point %d does not hold the peak %d at %d", tl.PeakPoint, d.Peak.AllocatedBytes, d.Peak.EventIndex)
	}
	if tl.OOMPoint < 0 || tl.EventIndex[tl.OOMPoint] != d.OOM.EventIndex {
		t.Errorf("OOM point %d, want event %d", tl.OOMPoint, d.OOM.EventIndex)
	}
	for i := range tl.EventIndex {
		var c result.Categories
		for k := range c {
			c[k] = tl.ByCategory[k][i]
		}
		if c.Total() != tl.Allocated[i] || (i > 0 && tl.EventIndex[i] <= tl.EventIndex[i-1]) {
			t.Fatalf("point %d: categories %d, allocated %d (or indices not increasing)", i, c.Total(), tl.Allocated[i])
		}
	}
	// Every event's allocated value lies under the thinned maximum of its bucket: the max is kept.
	var max int64
	for _, v := range tl.Allocated {
		max = maxInt(max, v)
	}
	if max != d.Peak.AllocatedBytes {
		t.Errorf("timeline max %d, peak %d", max, d.Peak.AllocatedBytes)
	}
}
