package leaks

import (
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// TestTrainingFamilies runs training loops (zero_grad, forward at
// train.py:92, loss, backward, AdamW step) with the model as modules and
// as plain functions (no nn.Module or forward frames), 1, 2, 12 and 48
// layers, fp32 and bf16 autocast, every kind of stack. The steps are the
// optimizer steps. The loop calling loss.backward(retain_graph=True) and
// keeping every loss is one retained_graph at the model's call in the
// training loop (train.py:92 <module>), whatever the stacks show of the
// model — never growing_list findings per forward site — with the bytes
// the simulated run grows by per step (the median of its steps but the
// first and the last) within 10%; with C++ frames only nothing tells
// the forward's call apart: the finding may name no site, but no other
// kind goes above low. Keeping the logits is a growing_list at the head's
// line; the healthy loop gives nothing above low.
func TestTrainingFamilies(t *testing.T) {
	for _, layers := range []int{1, 2, 12, 48} {
		for _, autocast := range []bool{false, true} {
			for _, functional := range []bool{false, true} {
				for _, stacks := range stackKinds {
					c := familyConfig(layers, autocast, stacks)
					c.Functional, c.FirstExtra = functional, false
					t.Run(fmt.Sprintf("%d layers, autocast %v, functional %v, %s", layers, autocast, functional, stacks), func(t *testing.T) {
						checkTraining(t, c)
					})
				}
			}
		}
	}
}

func checkTraining(t *testing.T, c snapshottest.LeakConfig) {
	sim := snapshottest.TrainLoopRetainGraph(c)
	perStep, _ := simStepGrowth(sim, 2, c.Steps-1)
	ls, p := runFamily(t, sim)
	if p.Source != result.StepsFromOptimizer || len(p.Spans) < c.Steps-1 {
		t.Errorf("retain_graph: steps %s, %d steps", p.Evidence, len(p.Spans))
	}
	site, head := "", "model.py:150 forward"
	if c.Functional {
		head = "fmodel.py:150 model"
	}
	if hasPython(c.Stacks) {
		site = "train.py:92 <module>"
	} else {
		head = ""
	}
	checkFamilyFinding(t, "retain_graph, losses kept", ls, result.LeakRetainedGraph, site, perStep)
	ls, _ = runFamily(t, snapshottest.TrainLoopGrowingList(c))
	checkFamilyFinding(t, "outputs.append(logits)", ls, result.LeakGrowingList, head, c.LogitsBytes())
	ls, _ = runFamily(t, snapshottest.TrainLoopHealthy(c))
	checkLeakFindings(t, nil, ls, nil)
}

// TestTrainThenEvalFamilies runs a training loop followed by an evaluation
// loop in one function (TrainThenEval), the model as modules and as
// functions, 1, 2, 12 and 48 layers, every kind of stack. The training
// steps come from the optimizer; the evaluation loop is no trailing part
// of the last one: with Python frames that show its loop, its iterations
// are steps of their own after the training steps (6 + 6 steps), and the
// evaluation doing total_loss += loss is a retained_graph at the model's
// call in it (train.py:113 fit) seen in those steps, bytes per step within
// 10%. Without them nothing goes above low; the healthy evaluation gives
// nothing above low either.
func TestTrainThenEvalFamilies(t *testing.T) {
	for _, layers := range []int{1, 2, 12, 48} {
		for _, functional := range []bool{false, true} {
			for _, stacks := range stackKinds {
				c := familyConfig(layers, false, stacks)
				c.Functional, c.FirstExtra = functional, false
				t.Run(fmt.Sprintf("%d layers, functional %v, %s", layers, functional, stacks), func(t *testing.T) {
					checkTrainThenEval(t, c)
				})
			}
		}
	}
}

func checkTrainThenEval(t *testing.T, c snapshottest.LeakConfig) {
	visible := hasPython(c.Stacks) && (!c.Functional || c.Layers >= 2)
	ls, p := runFamily(t, snapshottest.TrainThenEval(c, true))
	if visible {
		checkFamilyFinding(t, "train, then eval with total_loss += loss", ls, result.LeakRetainedGraph, "train.py:113 fit", c.SavedPerStep()+c.Tokens*4+4)
		var complete []int
		for _, sp := range p.Spans {
			if sp.Complete {
				complete = append(complete, sp.StartEvent)
			}
		}
		if len(complete) != 2*c.Steps {
			t.Errorf("steps %s: %d complete of %d", p.Evidence, len(complete), len(p.Spans))
		}
		for _, l := range ls {
			if l.Kind == result.LeakRetainedGraph && result.StepNumbers(l.SeenInSteps) != fmt.Sprintf("steps %d–%d", c.Steps+1, 2*c.Steps) {
				t.Errorf("retained_graph seen in %s", result.StepNumbers(l.SeenInSteps))
			}
		}
	} else {
		checkLeakFindings(t, nil, ls, nil)
	}
	ls, _ = runFamily(t, snapshottest.TrainThenEval(c, false))
	checkLeakFindings(t, nil, ls, nil)
}
