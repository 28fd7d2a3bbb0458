package leaks

import (
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// TestLeakFamilies runs the families of leaking training programs through
// step detection and leak detection, each with 1, 2, 12 and 48 layers, in
// fp32 and under bf16 autocast, with each kind of stack (module frames,
// the user's files only, the user's files with C++ frames — the real
// 12-layer benchmark's —, C++ only, none):
//
//   - one forward pass of the model (a benchmark script, under grad mode and
//     under no_grad): no steps, no finding at any confidence;
//   - an evaluation loop under grad mode doing total_loss += loss, its six
//     iterations of different sequence lengths (so different sizes and,
//     with a padding mask, different allocation counts), the first one
//     allocating more: retained_graph at the call of the model in the loop
//     (eval.py:41 evaluate), its bytes per step within 10% of what a step's
//     forward saves (SavedPerStep, at the nominal length, + the loss's
//     log-softmax statistics and scalar), high confidence, steps from the
//     loop frame (eval.py:38, the body's first line);
//   - the same loop under no_grad keeping every step's logits: growing_list
//     at model.py:150 forward, the logits' bytes per step within 10%;
//   - the healthy loop (no_grad, loss.item()): nothing above low;
//   - generation (transformers' _sample loop, a key/value cache a token
//     longer every step): nothing above low;
//   - a framework-driven loop (hydra → a Lightning-style prediction loop,
//     deep library stacks) keeping the logits, and its healthy counterpart.
//
// Without Python frames nothing tells one iteration of a loop from one
// layer of a pass: the loops get no steps, hence no finding above low;
// with ProfilerStep#N annotations they get the right kind and bytes.
func TestLeakFamilies(t *testing.T) {
	for _, layers := range []int{1, 2, 12, 48} {
		for _, autocast := range []bool{false, true} {
			for _, stacks := range []snapshottest.StackKind{snapshottest.StacksModule, snapshottest.StacksUser, snapshottest.StacksUserCpp, snapshottest.StacksCpp, snapshottest.StacksNone} {
				c := snapshottest.DefaultLeakConfig
				c.Layers, c.Autocast, c.Stacks, c.Steps = layers, autocast, stacks, 6
				c.VaryTokens, c.FirstExtra = true, true
				name := fmt.Sprintf("%d layers, autocast %v, %s", layers, autocast, stacks)
				t.Run(name, func(t *testing.T) { checkFamilies(t, c) })
			}
		}
	}
}

func checkFamilies(t *testing.T, c snapshottest.LeakConfig) {
	python := c.Stacks == snapshottest.StacksModule || c.Stacks == snapshottest.StacksUser || c.Stacks == snapshottest.StacksUserCpp
	run := func(sim *snapshottest.Sim) ([]result.Leak, []*history.History) {
		s := analysistest.Read(t, sim, 0)
		hs := leakHistories(s)
		for _, h := range hs {
			for k, sp := range h.Steps.Spans {
				if sp.EndEvent < sp.StartEvent || k > 0 && sp.StartEvent <= h.Steps.Spans[k-1].EndEvent {
					t.Errorf("step %d spans events %d–%d", sp.Step, sp.StartEvent, sp.EndEvent)
				}
			}
		}
		return Detect(s, hs), hs
	}
	// (a) one forward pass: no steps, nothing at all
	for _, grad := range []bool{true, false} {
		ls, hs := run(snapshottest.ForwardPass(c, grad))
		if len(ls) != 0 {
			t.Errorf("one forward pass (grad %v): %s", grad, describeLeaks(ls))
		}
		if p := hs[0].Steps; p.Source != result.StepsNone {
			t.Errorf("one forward pass (grad %v) cut into %d steps by %s", grad, len(p.Spans), p.Evidence)
		}
		noBackward(t, "one forward pass", hs[0])
	}
	graphPerStep := c.SavedPerStep() + c.Tokens*4 + 4
	// (b) the leaky evaluation loop
	ls, hs := run(snapshottest.EvalLoop(c, true))
	if python {
		checkFamilyFinding(t, "total_loss += loss", ls, result.LeakRetainedGraph, "eval.py:41 evaluate", graphPerStep)
		if p := hs[0].Steps; p.Source != result.StepsFromLoop || p.Site != "eval.py:38 evaluate" || len(p.Spans) != c.Steps {
			t.Errorf("eval loop steps: %s %q, %d steps", p.Evidence, p.Site, len(p.Spans))
		}
	} else {
		checkLeakFindings(t, nil, ls, nil)
		prof := c
		prof.Profiler = true
		ls, _ = run(snapshottest.EvalLoop(prof, true))
		checkFamilyFinding(t, "total_loss += loss, ProfilerStep ranges", ls, result.LeakRetainedGraph, "", graphPerStep)
	}
	// the loop keeping its outputs
	ls, _ = run(snapshottest.EvalLoopKeepingOutputs(c))
	if python {
		checkFamilyFinding(t, "outputs.append(logits)", ls, result.LeakGrowingList, "model.py:150 forward", c.LogitsBytes())
	} else {
		checkLeakFindings(t, nil, ls, nil)
	}
	// the healthy loop
	ls, hs = run(snapshottest.EvalLoop(c, false))
	checkLeakFindings(t, nil, ls, nil)
	noBackward(t, "healthy evaluation loop", hs[0])
	// generation with a key/value cache: the cache grows with every token,
	// as expected — nothing above low; with module frames the steps are
	// transformers' _sample loop (its library frames are the loop)
	gen := c
	gen.Steps = 12
	ls, hs = run(snapshottest.Generate(gen))
	checkLeakFindings(t, nil, ls, nil)
	noBackward(t, "generation", hs[0])
	if c.Stacks == snapshottest.StacksModule {
		if p := hs[0].Steps; p.Source != result.StepsFromLoop || p.Site != "utils.py:2700 _sample" || len(p.Spans) != gen.Steps {
			t.Errorf("generation steps: %s %q, %d steps", p.Evidence, p.Site, len(p.Spans))
		}
	}
	// (c) driven by a framework
	if python {
		fw := c
		fw.Framework = true
		ls, hs = run(snapshottest.EvalLoopKeepingOutputs(fw))
		checkFamilyFinding(t, "framework, outputs kept", ls, result.LeakGrowingList, "model.py:150 forward", c.LogitsBytes())
		// with library frames the loop's per-iteration function; with the
		// user's files only, the user's predict_step, called once a step
		site := "lit_module.py:41 predict_step"
		if c.Stacks == snapshottest.StacksModule {
			site = "prediction_loop.py:250 _predict_step"
		}
		if p := hs[0].Steps; p.Source != result.StepsFromLoop || p.Site != site || len(p.Spans) != c.Steps {
			t.Errorf("framework loop steps: %s %q, %d steps", p.Evidence, p.Site, len(p.Spans))
		}
		ls, _ = run(snapshottest.EvalLoop(fw, false))
		checkLeakFindings(t, nil, ls, nil)
	}
}

// checkFamilyFinding asserts one finding of kind at site ("" = any) with
// bytes per step within 10% of want, at high confidence (the steps came
// from structure), and nothing else above low.
func checkFamilyFinding(t *testing.T, what string, ls []result.Leak, kind, site string, want int64) {
	t.Helper()
	checkFindingAt(t, what, ls, kind, site, want, result.High)
}

// checkFindingAt is checkFamilyFinding at confidence conf.
func checkFindingAt(t *testing.T, what string, ls []result.Leak, kind, site string, want int64, conf result.Confidence) {
	t.Helper()
	found := false
	for _, l := range ls {
		if l.Kind != kind {
			if l.Confidence != result.Low {
				t.Errorf("%s: unexpected %s (%s) at %s: %s", what, l.Kind, l.Confidence, l.Site, l.Evidence)
			}
			continue
		}
		found = true
		if site != "" && l.Site != site {
			t.Errorf("%s: %s at %q, want %q", what, kind, l.Site, site)
		}
		if d := float64(l.BytesPerStep-want) / float64(want); d < -0.1 || d > 0.1 {
			t.Errorf("%s: %s of %d bytes per step, want %d ±10%% (%+.1f%%)", what, kind, l.BytesPerStep, want, 100*d)
		}
		if l.Confidence != conf {
			t.Errorf("%s: %s at %s confidence, want %s: %s", what, kind, l.Confidence, conf, l.Evidence)
		}
	}
	if !found {
		t.Errorf("%s: no %s; got %s", what, kind, describeLeaks(ls))
	}
}

// noBackward asserts that a program without backward shows no backward
// phase (frees after a forward are not a backward).
func noBackward(t *testing.T, what string, h *history.History) {
	t.Helper()
	for _, sp := range h.Phases.Spans {
		if sp.Phase == result.PhaseBackward {
			t.Errorf("%s: a backward phase, events %d–%d", what, sp.StartEvent, sp.EndEvent)
			return
		}
	}
}
