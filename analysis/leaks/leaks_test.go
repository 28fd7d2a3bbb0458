package leaks

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// leakHistories builds one History per device that has events or segments.
func leakHistories(s *snapshot.Snapshot) []*history.History {
	var hs []*history.History
	for _, d := range s.Devices {
		if len(d.Events) == 0 && len(d.Segments) == 0 {
			continue
		}
		hs = append(hs, history.Build(s, d))
	}
	return hs
}

// wantLeak is a finding a fixture must produce.
type wantLeak struct {
	kind string
	site string
	// bytesPerStep is what the finding must say a step leaks, from the
	// simulation (fixed or simGrowth).
	bytesPerStep func(*snapshottest.Sim) int64
	conf         result.Confidence // at least
	stepsAtLeast int
}

// fixed is a per-step figure known in advance.
func fixed(n int64) func(*snapshottest.Sim) int64 {
	return func(*snapshottest.Sim) int64 { return n }
}

// simGrowth is the per-step figure of a retained graph: the median (the
// upper one of an even count) of how much device 0's allocated blocks grew
// in each of steps first…last of the simulation, whose own allocator sizes
// the blocks (a tensor's block keeps an unsplit rest of up to 1 MiB
// depending on the layout, so steps differ by a few hundred KiB).
func simGrowth(first, last int) func(*snapshottest.Sim) int64 {
	return func(s *snapshottest.Sim) int64 {
		per, _ := simStepGrowth(s, first, last)
		return per
	}
}

// simStepGrowth returns simGrowth's median and the total growth over steps
// first…last (StepAllocated[k] is the allocated bytes after step k).
func simStepGrowth(s *snapshottest.Sim, first, last int) (median, total int64) {
	var g []int64
	for k := first; k <= last; k++ {
		d := s.StepAllocated[k] - s.StepAllocated[k-1]
		g = append(g, d)
		total += d
	}
	slices.Sort(g)
	return g[len(g)/2], total
}

func leakConfRank(c result.Confidence) int {
	switch c {
	case result.High:
		return 2
	case result.Medium:
		return 1
	}
	return 0
}

func TestLeakFixtures(t *testing.T) {
	c := snapshottest.DefaultLeakConfig
	prof := c
	prof.Profiler = true
	long := c
	long.Steps = 10
	deep := c
	deep.Layers = 24
	single := deep
	single.Steps = 1
	a := c.ActivationBytes()
	// A retained graph keeps, per step, what the forward saved
	// (c.SavedPerStep), the log-softmax stats and the loss scalar: in
	// allocator blocks, the growth of steps 2…7 (step 1 builds what later
	// steps reuse; step 8's graph is the one still in use).
	evalLeak := simGrowth(2, c.Steps-1)
	tests := []struct {
		name string
		sim  func() *snapshottest.Sim
		want []wantLeak // nil: no finding above low confidence
	}{
		{"eval loop under grad mode, total_loss += loss", func() *snapshottest.Sim { return snapshottest.EvalLoop(c, true) },
			[]wantLeak{{result.LeakRetainedGraph, "eval.py:41 evaluate", evalLeak, result.High, 5}}},
		{"eval loop under grad mode, ProfilerStep ranges", func() *snapshottest.Sim { return snapshottest.EvalLoop(prof, true) },
			[]wantLeak{{result.LeakRetainedGraph, "eval.py:41 evaluate", evalLeak, result.High, 5}}},
		{"eval loop of a 24-layer model under grad mode", func() *snapshottest.Sim { return snapshottest.EvalLoop(deep, true) },
			[]wantLeak{{result.LeakRetainedGraph, "eval.py:41 evaluate", simGrowth(2, deep.Steps-1), result.High, 5}}},
		{"eval loop of a 24-layer model under no_grad", func() *snapshottest.Sim { return snapshottest.EvalLoop(deep, false) }, nil},
		{"one forward of a 24-layer model under grad mode: layers are not steps", func() *snapshottest.Sim { return snapshottest.EvalLoop(single, true) }, nil},
		{"eval loop under no_grad, loss.item()", func() *snapshottest.Sim { return snapshottest.EvalLoop(c, false) }, nil},
		{"eval loop under no_grad, ProfilerStep ranges", func() *snapshottest.Sim { return snapshottest.EvalLoop(prof, false) }, nil},
		{"training loop appending logits", func() *snapshottest.Sim { return snapshottest.TrainLoopGrowingList(c) },
			[]wantLeak{{result.LeakGrowingList, "model.py:150 forward", fixed(c.LogitsBytes()), result.High, 5}}},
		{"training loop appending logits, ProfilerStep ranges", func() *snapshottest.Sim { return snapshottest.TrainLoopGrowingList(prof) },
			[]wantLeak{{result.LeakGrowingList, "model.py:150 forward", fixed(c.LogitsBytes()), result.High, 5}}},
		// c.SavedPerStep() - c.LogitsBytes() + c.Tokens*4 + 4 requested a step.
		{"training loop with retain_graph=True keeping the losses", func() *snapshottest.Sim { return snapshottest.TrainLoopRetainGraph(c) },
			[]wantLeak{{result.LeakRetainedGraph, "train.py:92 <module>", simGrowth(2, c.Steps-1), result.High, 5}}},
		{"healthy training loop", func() *snapshottest.Sim { return snapshottest.TrainLoopHealthy(c) }, nil},
		{"healthy training loop, ProfilerStep ranges", func() *snapshottest.Sim { return snapshottest.TrainLoopHealthy(prof) }, nil},
		{"healthy training loop, 2 steps", func() *snapshottest.Sim {
			short := c
			short.Steps = 2
			return snapshottest.TrainLoopGrowingList(short) // too few steps to tell a leak
		}, nil},
		{"reference cycle collected every 4 steps", func() *snapshottest.Sim { return snapshottest.CycleSawtooth(long, 4) },
			[]wantLeak{{result.LeakReferenceCycle, "model.py:96 forward", fixed(2 * a), result.High, 6}}},
		{"reference cycle collected every 3 steps", func() *snapshottest.Sim { return snapshottest.CycleSawtooth(long, 3) },
			[]wantLeak{{result.LeakReferenceCycle, "model.py:96 forward", fixed(2 * a), result.Medium, 4}}},
		{"history grown with torch.cat", func() *snapshottest.Sim { return snapshottest.TrainLoopGrowingCat(c) },
			[]wantLeak{{result.LeakStepGrowth, "train.py:101 <module>", fixed(a), result.High, 4}}},
		{"reserved memory drift with flat allocated", func() *snapshottest.Sim { return snapshottest.TrainLoopReservedDrift(c, 4<<20) }, nil},
		{"Train scenario (scenarios.go), 6 steps", func() *snapshottest.Sim {
			tc := snapshottest.TrainConfig{Layers: 2, Hidden: 256, Seq: 128, Batch: 2, Heads: 4, Steps: 6, NoBwdStack: true}
			return snapshottest.Train(tc)
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := tt.sim()
			s := analysistest.Read(t, sim, 0)
			hs := leakHistories(s)
			got := Detect(s, hs)
			checkLeakFindings(t, sim, got, tt.want)
		})
	}
}

// checkLeakFindings asserts that every wanted finding is there (kind, site, bytes
// per step, confidence at least) and that nothing else is above low
// confidence.
func checkLeakFindings(t *testing.T, sim *snapshottest.Sim, got []result.Leak, want []wantLeak) {
	t.Helper()
	matched := make([]bool, len(got))
	for _, w := range want {
		found := false
		for i, l := range got {
			if l.Kind != w.kind {
				continue
			}
			found, matched[i] = true, true
			if l.Site != w.site {
				t.Errorf("%s: site %q, want %q", w.kind, l.Site, w.site)
			}
			if per := w.bytesPerStep(sim); l.BytesPerStep != per {
				t.Errorf("%s: %d bytes per step, want %d", w.kind, l.BytesPerStep, per)
			}
			if leakConfRank(l.Confidence) < leakConfRank(w.conf) {
				t.Errorf("%s: confidence %s, want at least %s", w.kind, l.Confidence, w.conf)
			}
			if l.Steps < w.stepsAtLeast {
				t.Errorf("%s: seen in %d steps, want at least %d", w.kind, l.Steps, w.stepsAtLeast)
			}
			if l.TotalBytes < l.BytesPerStep || l.TotalBytes <= 0 {
				t.Errorf("%s: total %d below bytes per step %d", w.kind, l.TotalBytes, l.BytesPerStep)
			}
			if !strings.Contains(l.Evidence, units.FormatBytes(l.BytesPerStep)) || !strings.Contains(l.Fix, units.FormatBytes(l.TotalBytes)) {
				t.Errorf("%s: evidence or fix lacks the sizes:\n%s\n%s", w.kind, l.Evidence, l.Fix)
			}
			if l.Fix == "" || l.Evidence == "" {
				t.Errorf("%s: empty evidence or fix", w.kind)
			}
		}
		if !found {
			t.Errorf("no %s finding; got %s", w.kind, describeLeaks(got))
		}
	}
	for i, l := range got {
		if !matched[i] && l.Confidence != result.Low {
			t.Errorf("unexpected %s finding (%s) at %s: %s", l.Kind, l.Confidence, l.Site, l.Evidence)
		}
	}
}

func describeLeaks(ls []result.Leak) string {
	if len(ls) == 0 {
		return "none"
	}
	var b strings.Builder
	for _, l := range ls {
		b.WriteString("\n  " + l.Kind + " " + string(l.Confidence) + " " + l.Site + ": " + l.Evidence)
	}
	return b.String()
}

// TestLeakFixtureSpecifics checks what the table does not: the fixes name
// the right remedies, StepsUntilFull stays 0 without a known capacity, the
// reserved drift is real in its fixture, and the step plans.
func TestLeakFixtureSpecifics(t *testing.T) {
	c := snapshottest.DefaultLeakConfig
	sim := snapshottest.EvalLoop(c, true)
	s := analysistest.Read(t, sim, 0)
	ls := Detect(s, leakHistories(s))
	if len(ls) != 1 {
		t.Fatalf("eval leak: %s", describeLeaks(ls))
	}
	l := ls[0]
	for _, w := range []string{"torch.no_grad()", "torch.inference_mode()", ".item()", ".detach()"} {
		if !strings.Contains(l.Fix, w) {
			t.Errorf("retained_graph fix lacks %q: %s", w, l.Fix)
		}
	}
	if l.StepsUntilFull != 0 {
		t.Errorf("StepsUntilFull = %d without a known capacity", l.StepsUntilFull)
	}
	// Every step's graph is held at the end, the first and the last
	// included: the total counts them all (the saving of the fix). In
	// allocator blocks that is how much the simulation grew over its steps,
	// less the one total_loss scalar still alive (a 512 B block; the
	// earlier ones died step by step).
	if _, grew := simStepGrowth(sim, 1, c.Steps); l.TotalBytes != grew-512 {
		t.Errorf("retained_graph total %d, want %d (steps 1…%d)", l.TotalBytes, grew-512, c.Steps)
	}
	if want := []int{1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(l.SeenInSteps, want) || l.Steps != len(want) {
		t.Errorf("retained_graph seen in steps %v (%d), want %v", l.SeenInSteps, l.Steps, want)
	}
	if h := leakHistories(s)[0]; h.Steps.Evidence != "the loop at eval.py:38 evaluate" {
		t.Errorf("eval steps should come from the loop frame (eval.py:38, the loop body's first line): %s", h.Steps.Evidence)
	}
	if !strings.Contains(l.Evidence, "from steps 1–8 of 8") || !strings.Contains(l.Explanation, "No backward pass frees them") {
		t.Errorf("retained_graph evidence: %s / %s", l.Evidence, l.Explanation)
	}

	s = analysistest.Read(t, snapshottest.TrainLoopGrowingList(c), 0)
	ls = Detect(s, leakHistories(s))
	if len(ls) != 1 || !strings.Contains(ls[0].Fix, ".detach().cpu()") || !strings.HasPrefix(ls[0].Fix, ls[0].Remedy) || leakHistories(s)[0].Steps.Source != result.StepsFromOptimizer {
		t.Errorf("growing list: %s", describeLeaks(ls))
	}
	// A list that keeps the logits of each of 6 steps holds 6 of them at
	// the end (the first and last steps count too).
	six := c
	six.Steps = 6
	s = analysistest.Read(t, snapshottest.TrainLoopGrowingList(six), 0)
	ls = Detect(s, leakHistories(s))
	if len(ls) != 1 || ls[0].TotalBytes != 6*c.LogitsBytes() || !slices.Equal(ls[0].SeenInSteps, []int{1, 2, 3, 4, 5, 6}) ||
		!strings.Contains(ls[0].Fix, "Saves "+units.FormatBytes(6*c.LogitsBytes())+" now") {
		t.Errorf("growing list over 6 steps holds %d bytes (want 6 logits, %d) in steps %v: %s", ls[0].TotalBytes, 6*c.LogitsBytes(), ls[0].SeenInSteps, describeLeaks(ls))
	}

	// One forward pass of a deep model: its layers recur with a strong
	// period (saved activations rising layer after layer, like a leak), but
	// they are one call of the model, not steps.
	deep := c
	deep.Layers, deep.Steps = 24, 1
	s = analysistest.Read(t, snapshottest.EvalLoop(deep, true), 0)
	h := leakHistories(s)[0]
	var keys []uint64
	for i := range h.Device.Events {
		if h.Device.Events[i].Action == snapshot.ActionAlloc {
			keys = append(keys, history.SiteKey(h, i))
		}
	}
	if sc := history.PeriodScore(keys, 7); sc < history.PeriodMatchMin { // 7 allocations per layer
		t.Errorf("the layer period scores %.2f: the fixture does not test the layer rule", sc)
	}
	if plan := h.Steps; len(plan.Spans) != 0 {
		t.Errorf("one forward pass was cut into %d steps (%s)", len(plan.Spans), plan.Evidence)
	}

	s = analysistest.Read(t, snapshottest.TrainLoopReservedDrift(c, 4<<20), 0)
	h = leakHistories(s)[0]
	first, last := h.Steps.Spans[1], h.Steps.Spans[len(h.Steps.Spans)-2]
	if h.ReservedAt(last.EndEvent) <= h.ReservedAt(first.EndEvent) {
		t.Errorf("the drift fixture does not grow reserved memory: %d → %d", h.ReservedAt(first.EndEvent), h.ReservedAt(last.EndEvent))
	}
	if first.EndAllocatedBytes != last.EndAllocatedBytes {
		t.Errorf("the drift fixture should keep allocated memory flat: %d → %d", first.EndAllocatedBytes, last.EndAllocatedBytes)
	}
}

// TestLeakChromeTrace: a hand-written Kineto trace of an inference loop
// keeping every step's output; steps from ProfilerStep#N spans, the site
// from python_function spans, and StepsUntilFull from totalGlobalMem.
func TestLeakChromeTrace(t *testing.T) {
	const out = 64 << 20
	const capacity = 80_000_000_000
	s := analysistest.ReadJSON(t, snapshottest.KinetoGrowingList(8, out, capacity, 10<<30))
	hs := leakHistories(s)
	ls := Detect(s, hs)
	checkLeakFindings(t, nil, ls, []wantLeak{{result.LeakGrowingList, "model.py:60 forward", fixed(out), result.High, 5}})
	var h *history.History
	for _, x := range hs {
		if x.Device.ID == 0 {
			h = x
		}
	}
	if h == nil || h.Steps.Source != result.StepsFromAnnotations {
		t.Fatalf("no device 0 with ProfilerStep steps")
	}
	last := h.Steps.Spans[len(h.Steps.Spans)-1]
	want := int((capacity - last.PeakAllocatedBytes + out - 1) / out)
	for _, l := range ls {
		if l.Kind == result.LeakGrowingList && l.StepsUntilFull != want {
			t.Errorf("StepsUntilFull = %d, want %d", l.StepsUntilFull, want)
		}
	}
}

// TestLeakStepsUntilFull checks the arithmetic.
func TestLeakStepsUntilFull(t *testing.T) {
	for _, tt := range []struct {
		cap, peak, rate int64
		want            int
	}{
		{100, 40, 20, 3},
		{100, 41, 20, 3},
		{100, 39, 20, 4},
		{100, 100, 20, 1},
		{100, 120, 20, 1},
		{100, 40, 0, 0},
	} {
		if got := stepsUntilFull(tt.cap, tt.peak, tt.rate); got != tt.want {
			t.Errorf("stepsUntilFull(%d, %d, %d) = %d, want %d", tt.cap, tt.peak, tt.rate, got, tt.want)
		}
	}
}

// TestLeakRealFiles: none of the real files shows a high-confidence leak
// (they are single steps, healthy training loops, benchmarks and
// inference), and each gets the findings listed here (kind, at most this
// confidence). A file missing from the table fails the test, so a new real
// file gets looked at.
func TestLeakRealFiles(t *testing.T) {
	type finding struct {
		kind string
		conf result.Confidence
	}
	table := map[string][]finding{
		"edge_2dev_expandable_no_trace_albi2.pickle":              nil,
		"edge_no_segments_sunnysood.pickle":                       nil,
		"genA_torch2.0_yiyi_1.3b_snapshot.pickle":                 nil,
		"genA_torch2.0_yiyi_oom_snapshot.pickle":                  nil,
		"genB_torch2.1_cranberrii.pickle":                         nil,
		"genB_torch2.1_maphsge4_multistream_cpp.pickle":           nil,
		"genB_torch2.1_zijiandu_state_only_diffusion.pickle":      nil,
		"genC_torch2.2_jaspersolt_snapshot_entries.pickle":        nil,
		"genC_torch2.2_nesta_OOM_pickle_named_json.pickle":        nil,
		"genD_torch2.3_hugepanda.pickle":                          nil,
		"genD_torch2.4_lfielike_state_only.pickle":                nil,
		"genE_torch2.5_sqattn.pickle":                             nil,
		"genE_torch2.6x_kkaitlyn_annotations.pickle":              nil,
		"genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle": nil,
		"genF_torch2.8_zidongliu_zeroth_order_fl.pickle":          nil,
		"genG_torch2.10x_bcrafton.pickle":                         nil,
		"genG_torch2.10x_magma27_python_stacks.pickle":            nil,
		"genG_torch2.1x_wedsonlin_inference.pickle":               nil,
		"kkaitlyn_ctx128_fullstep.pickle":                         nil,
		"nothanmin_fullstep.pickle":                               nil,
		"wedsonlin_medium_128_training.pickle":                    nil,
		"wedsonlin_medium_256_training.pickle":                    nil,
		"segments_list_memory_snapshot_muduard.pkl":               nil,
		"hta_ddp_training_gpu_memory.json.gz":                     nil,
		"hta_large_integer.json.gz":                               nil,
		"hta_memory_timeline_categories.raw.json.gz":              nil,
		"hta_rocm_minitoy_train.json.gz":                          nil,
		"kineto_resnet50_legacy_v100.json.gz":                     nil,
		"tracelens_resnet18_train_cpu_memory_stacks.json.gz":      nil,
		"tracelens_rocm_norm_layers.json.gz":                      nil,
		// recorded/: PyTorch 2.11's own files; its README says none leaks.
		"cuda_graph_inference.pickle.gz":                        nil,
		"gpt2_fp32_b8_s1024.small.pickle.gz":                    nil,
		"llama_s_amp_b4_s1024.small.pickle.gz":                  nil,
		"hf_llama_lora16_bf16_train.pickle.gz":                  nil,
		"hf_llama_mixed_ckpt_train.memory_timeline.raw.json.gz": nil,
		"hf_llama_mixed_ckpt_train.pickle.gz":                   nil,
		"hf_llama_mixed_ckpt_train.trace.json.gz":               nil,
		"snapshot_rank0_682.pickle":                             nil,
		"snapshot_rank1_683.pickle":                             nil,
		"oom_snapshot_rank0_590.pickle":                         nil,
		"snapshot_rank0_590.pickle":                             nil,
		"snapshot_rank0_824.pickle":                             nil,
		"trace_rank0_824.json.gz":                               nil,
		"snapshot_rank0_512.pickle":                             nil,
	}
	files := snapshottest.SharedInputs(t)
	seen := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			want, ok := table[name]
			if !ok {
				t.Fatalf("%s is not in the table: look at its findings and add it", name)
			}
			s, err := load.Open(f, snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := Detect(s, leakHistories(s))
			for _, l := range got {
				if l.Confidence == result.High {
					t.Errorf("high-confidence %s on a real file at %s: %s", l.Kind, l.Site, l.Evidence)
				}
				ok := false
				for _, w := range want {
					if w.kind == l.Kind && leakConfRank(l.Confidence) <= leakConfRank(w.conf) {
						ok = true
					}
				}
				if !ok {
					t.Errorf("unexpected %s (%s) at %s: %s", l.Kind, l.Confidence, l.Site, l.Evidence)
				}
			}
		})
	}
	for name := range table {
		if !seen[name] && os.Getenv("TORCHMEM_REQUIRE_SHARED") != "" {
			t.Errorf("%s is missing from ../shared", name)
		}
	}
}

// TestLeakConfidenceFromPeriod: high confidence needs steps whose
// boundaries the program showed (annotations, optimizer steps, a loop
// frame); the same survivors on steps found only from the period of
// allocation sites are medium at most.
func TestLeakConfidenceFromPeriod(t *testing.T) {
	s := analysistest.Read(t, snapshottest.TrainLoopGrowingList(snapshottest.DefaultLeakConfig), 0)
	hs := leakHistories(s)
	ls := Detect(s, hs)
	if len(ls) != 1 || ls[0].Confidence != result.High || hs[0].Steps.Source != result.StepsFromOptimizer {
		t.Fatalf("optimizer steps: %s", describeLeaks(ls))
	}
	hs[0].Steps.Source = result.StepsFromPeriod // the same boundaries, as if found from the period
	ls = Detect(s, hs)
	if len(ls) != 1 || ls[0].Confidence != result.Medium {
		t.Errorf("period steps: %s", describeLeaks(ls))
	}
}
