package leaks

import (
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// stackKinds are the kinds of stacks every family runs with.
var stackKinds = []snapshottest.StackKind{snapshottest.StacksModule, snapshottest.StacksUser,
	snapshottest.StacksUserCpp, snapshottest.StacksCpp, snapshottest.StacksNone}

// familyConfig is the configuration of the step families: six iterations
// of different sequence lengths, the first allocating more.
func familyConfig(layers int, autocast bool, stacks snapshottest.StackKind) snapshottest.LeakConfig {
	c := snapshottest.DefaultLeakConfig
	c.Layers, c.Autocast, c.Stacks, c.Steps = layers, autocast, stacks, 6
	c.VaryTokens, c.FirstExtra = true, true
	return c
}

// hasPython reports whether stacks of kind k hold Python frames.
func hasPython(k snapshottest.StackKind) bool {
	return k == snapshottest.StacksModule || k == snapshottest.StacksUser || k == snapshottest.StacksUserCpp
}

// runFamily reads a simulated run and detects its steps and leaks,
// asserting that its steps are ordered and disjoint.
func runFamily(t *testing.T, sim *snapshottest.Sim) ([]result.Leak, *history.StepPlan) {
	t.Helper()
	s := analysistest.Read(t, sim, 0)
	hs := leakHistories(s)
	p := hs[0].Steps
	for k, sp := range p.Spans {
		if sp.EndEvent < sp.StartEvent || k > 0 && sp.StartEvent <= p.Spans[k-1].EndEvent {
			t.Errorf("step %d spans events %d–%d", sp.Step, sp.StartEvent, sp.EndEvent)
		}
	}
	return Detect(s, hs), p
}

// TestFunctionModelFamilies runs the model written as plain functions
// (def model(x, ws): for w in ws.layers: h = block(h, w) — no nn.Module
// and no forward frames) with 1, 2, 12 and 48 layers, fp32 and bf16
// autocast, every kind of stack:
//
//   - one pass of the model: no steps, no finding at any confidence (the
//     layer loop is the only loop the stacks show, and nothing says it is
//     outside the model);
//   - the evaluation loop doing total_loss += loss: with Python frames and
//     at least two layers the layer loop shows inside the function the
//     evaluation loop calls, so the evaluation loop is the step loop:
//     retained_graph at eval.py:41 evaluate, bytes per step within 10%,
//     six steps from the loop at eval.py:38; with one layer only one loop
//     shows and nothing tells it from a layer loop: no steps, nothing
//     above low, and the plan says why;
//   - the same loop keeping its logits: growing_list at fmodel.py:150; and
//     keeping the final hidden state too (eval.py:41 allocating again after
//     eval.py:42): still the six iterations;
//   - the healthy loop (no_grad, .item()): nothing above low.
func TestFunctionModelFamilies(t *testing.T) {
	for _, layers := range []int{1, 2, 12, 48} {
		for _, autocast := range []bool{false, true} {
			for _, stacks := range stackKinds {
				c := familyConfig(layers, autocast, stacks)
				c.Functional = true
				t.Run(fmt.Sprintf("%d layers, autocast %v, %s", layers, autocast, stacks), func(t *testing.T) {
					checkFunctionModel(t, c)
				})
			}
		}
	}
}

func checkFunctionModel(t *testing.T, c snapshottest.LeakConfig) {
	for _, grad := range []bool{true, false} {
		ls, p := runFamily(t, snapshottest.ForwardPass(c, grad))
		if len(ls) != 0 {
			t.Errorf("one pass (grad %v): %s", grad, describeLeaks(ls))
		}
		if len(p.Spans) > 1 {
			t.Errorf("one pass (grad %v) cut into %d steps by %s", grad, len(p.Spans), p.Evidence)
		}
		// with the layer loop in the stacks, the plan says why it is no step loop
		if hasPython(c.Stacks) && c.Layers >= 2 && p.Evidence != "the loop at fmodel.py:60 block may be the model's own layer loop: "+
			"no nn.Module or forward frames, and no loop around it" {
			t.Errorf("one pass (grad %v): evidence %q", grad, p.Evidence)
		}
	}
	visible := hasPython(c.Stacks) && c.Layers >= 2
	ls, p := runFamily(t, snapshottest.EvalLoop(c, true))
	if visible {
		checkFamilyFinding(t, "total_loss += loss", ls, result.LeakRetainedGraph, "eval.py:41 evaluate", c.SavedPerStep()+c.Tokens*4+4)
		if p.Source != result.StepsFromLoop || p.Site != "eval.py:38 evaluate" || len(p.Spans) != c.Steps {
			t.Errorf("eval loop steps: %s %q, %d steps", p.Evidence, p.Site, len(p.Spans))
		}
	} else {
		checkLeakFindings(t, nil, ls, nil)
		if hasPython(c.Stacks) && p.Source != result.StepsNone {
			t.Errorf("one loop and no model frames: %d steps by %s", len(p.Spans), p.Evidence)
		}
	}
	ls, _ = runFamily(t, snapshottest.EvalLoopKeepingOutputs(c))
	if visible {
		checkFamilyFinding(t, "outputs.append(logits)", ls, result.LeakGrowingList, "fmodel.py:150 model", c.LogitsBytes())
	} else {
		checkLeakFindings(t, nil, ls, nil)
	}
	// keeping the final norm's output too: the model's call line (eval.py:41)
	// allocates again after the loss's line, a return inside the iteration
	// that is no loop of its own — still six steps
	hid := c
	hid.KeepHidden = true
	_, p = runFamily(t, snapshottest.EvalLoopKeepingOutputs(hid))
	if visible && (p.Source != result.StepsFromLoop || p.Site != "eval.py:38 evaluate" || len(p.Spans) != c.Steps) {
		t.Errorf("outputs and hidden states kept: steps %s %q, %d steps", p.Evidence, p.Site, len(p.Spans))
	}
	ls, _ = runFamily(t, snapshottest.EvalLoop(c, false))
	checkLeakFindings(t, nil, ls, nil)
}

// TestNestedLoopFamilies runs two loops in one function, with the model as
// modules and as functions, 1, 2, 12 and 48 layers, every kind of stack:
// the evaluation loop nested in an epoch loop (three epochs of two
// batches, a counter made at each epoch's start) and a warm-up loop of
// three forwards before the evaluation loop; and one loop whose call line
// allocates again after the loss's line (KeepHidden). The steps are the six
// iterations of the evaluation loop (eval.py:38) — never the epochs, never
// one loop made of both — and the leak is found there; the healthy
// variants give nothing above low.
func TestNestedLoopFamilies(t *testing.T) {
	for _, layers := range []int{1, 2, 12, 48} {
		for _, functional := range []bool{false, true} {
			for _, stacks := range stackKinds {
				c := familyConfig(layers, false, stacks)
				c.Functional = functional
				t.Run(fmt.Sprintf("%d layers, functional %v, %s", layers, functional, stacks), func(t *testing.T) {
					checkNestedLoops(t, c)
				})
			}
		}
	}
}

func checkNestedLoops(t *testing.T, c snapshottest.LeakConfig) {
	visible := hasPython(c.Stacks) && (!c.Functional || c.Layers >= 2)
	shapes := []struct {
		name string
		sim  func(leak bool) *snapshottest.Sim
	}{
		{"epochs", func(leak bool) *snapshottest.Sim { return snapshottest.EvalEpochs(c, 3, leak) }},
		{"warm-up then eval", func(leak bool) *snapshottest.Sim { return snapshottest.WarmupThenEval(c, 3, leak) }},
	}
	// one loop whose call line allocates again after the next line (the
	// model keeping its final hidden state for the caller): a return inside
	// the iteration overlapping its body, no loop of its own
	hid := c
	hid.KeepHidden = true
	if _, p := runFamily(t, snapshottest.EvalLoopKeepingOutputs(hid)); visible &&
		(p.Source != result.StepsFromLoop || p.Site != "eval.py:38 evaluate" || len(p.Spans) != c.Steps) {
		t.Errorf("outputs and hidden states kept: steps %s %q, %d steps", p.Evidence, p.Site, len(p.Spans))
	}
	for _, sh := range shapes {
		ls, p := runFamily(t, sh.sim(true))
		if visible {
			checkFamilyFinding(t, sh.name, ls, result.LeakRetainedGraph, "eval.py:41 evaluate", c.SavedPerStep()+c.Tokens*4+4)
			if p.Source != result.StepsFromLoop || p.Site != "eval.py:38 evaluate" || len(p.Spans) != c.Steps {
				t.Errorf("%s: steps %s %q, %d steps", sh.name, p.Evidence, p.Site, len(p.Spans))
			}
		} else {
			checkLeakFindings(t, nil, ls, nil)
		}
		ls, _ = runFamily(t, sh.sim(false))
		checkLeakFindings(t, nil, ls, nil)
	}
}
