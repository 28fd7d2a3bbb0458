package leaks

import (
	"fmt"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// TestTrainingWithoutFramesFamilies runs training loops whose files tell
// nothing of their steps: no Python frames (C++ frames only, as
// stacks="all" keeps them for a C++ thread, or no stacks at all, as
// context=None records) and no Optimizer.step annotations (PyTorch before
// 2.5, or a training thread other than the recording one) — with 1, 2, 12
// and 48 layers, fp32 and bf16 autocast (whose bf16 activations of 2h
// tokens have the fp32 weights' sizes), sequence lengths varying by
// ±10%, with and without a first iteration that allocates more. Before,
// they got no steps, hence no finding. The steps now come from the
// pattern of a training step (each backward of the autograd engine with
// C++ frames, each sweep of parameter-sized allocations without): 6
// complete steps of 6, plus the recording's start. The loop calling
// backward(retain_graph=True) and keeping the losses is a retained_graph,
// the one keeping its logits a growing_list, each with the bytes per step
// the simulated run grows by within 10%, at medium confidence (the steps
// are a guess); the healthy loop gives nothing above low.
func TestTrainingWithoutFramesFamilies(t *testing.T) {
	for _, stacks := range []snapshottest.StackKind{snapshottest.StacksCpp, snapshottest.StacksNone} {
		for _, layers := range []int{1, 2, 12, 48} {
			for _, autocast := range []bool{false, true} {
				for _, extra := range []bool{false, true} {
					c := familyConfig(layers, autocast, stacks)
					c.FirstExtra, c.NoAnnotations = extra, true
					t.Run(fmt.Sprintf("%d layers, autocast %v, first extra %v, %s", layers, autocast, extra, stacks), func(t *testing.T) {
						checkTrainingWithoutFrames(t, c)
					})
				}
			}
		}
	}
}

func checkTrainingWithoutFrames(t *testing.T, c snapshottest.LeakConfig) {
	steps := func(what string, p *history.StepPlan) {
		t.Helper()
		complete := 0
		for _, sp := range p.Spans {
			if sp.Complete {
				complete++
			}
		}
		if p.Source != result.StepsFromPeriod || complete != c.Steps || !strings.HasPrefix(p.Evidence, "the repeating pattern of a training step") {
			t.Errorf("%s: %d complete steps of %d by %s: %s", what, complete, len(p.Spans), p.Source, p.Evidence)
		}
	}
	sim := snapshottest.TrainLoopRetainGraph(c)
	perStep, _ := simStepGrowth(sim, 2, c.Steps-1)
	ls, p := runFamily(t, sim)
	steps("retain_graph", p)
	checkFindingAt(t, "retain_graph, losses kept", ls, result.LeakRetainedGraph, "", perStep, result.Medium)
	ls, p = runFamily(t, snapshottest.TrainLoopGrowingList(c))
	steps("outputs.append(logits)", p)
	checkFindingAt(t, "outputs.append(logits)", ls, result.LeakGrowingList, "", c.LogitsBytes(), result.Medium)
	ls, p = runFamily(t, snapshottest.TrainLoopHealthy(c))
	steps("healthy", p)
	checkLeakFindings(t, nil, ls, nil)
}

// TestPatternStepsPhases: with C++ frames only and no annotations, every
// event after a step's backward run once came out backward (the order of
// phases said so); now each step of a training loop is a forward, then
// the backward (the engine's frames), then the optimizer's updates in an
// unknown phase — one forward span and one backward span per step.
func TestPatternStepsPhases(t *testing.T) {
	for _, layers := range []int{1, 12} {
		c := familyConfig(layers, false, snapshottest.StacksCpp)
		c.NoAnnotations = true
		s := analysistest.Read(t, snapshottest.TrainLoopHealthy(c), 0)
		h := leakHistories(s)[0]
		spans := map[int]map[result.Phase]int{}
		for _, sp := range h.Phases.Spans {
			if spans[sp.Step] == nil {
				spans[sp.Step] = map[result.Phase]int{}
			}
			spans[sp.Step][sp.Phase]++
		}
		for _, st := range h.Steps.Spans {
			if got := spans[st.Step]; st.Complete && (got[result.PhaseForward] != 1 || got[result.PhaseBackward] != 1) {
				t.Errorf("%d layers, step %d: phase spans %v", layers, st.Step, got)
			}
		}
	}
}

// TestPatternStepsNeedAPattern: what no training step made gets no steps
// from the pattern — a forward pass, or a forward-only loop, of every kind
// of stack without Python frames (nothing tells an iteration from a layer
// of the model), and a training loop of one step too few.
func TestPatternStepsNeedAPattern(t *testing.T) {
	for _, stacks := range []snapshottest.StackKind{snapshottest.StacksCpp, snapshottest.StacksNone} {
		for _, layers := range []int{2, 48} {
			c := familyConfig(layers, false, stacks)
			c.NoAnnotations = true
			for name, sim := range map[string]*snapshottest.Sim{
				"one forward pass":  snapshottest.ForwardPass(c, true),
				"evaluation loop":   snapshottest.EvalLoop(c, true),
				"outputs kept":      snapshottest.EvalLoopKeepingOutputs(c),
				"three train steps": snapshottest.TrainLoopRetainGraph(withSteps(c, history.MinLeakSteps-1)),
			} {
				ls, p := runFamily(t, sim)
				if p.Source == result.StepsFromPeriod && strings.HasPrefix(p.Evidence, "the repeating pattern") || len(ls) > 0 {
					t.Errorf("%s, %d layers, %s: %d steps by %s; %s", stacks, layers, name, len(p.Spans), p.Evidence, describeLeaks(ls))
				}
			}
		}
	}
}

func withSteps(c snapshottest.LeakConfig, n int) snapshottest.LeakConfig {
	c.Steps = n
	return c
}
