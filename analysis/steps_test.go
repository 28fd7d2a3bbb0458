package analysis

import (
	"slices"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/result"
)

// TestStepsRealFiles checks the step plan of the real files whose loops
// were read by hand (python3 pickle, the lines of the loop's frame in each
// allocation's stack):
//
//   - zidongliu (federated zeroth-order fine-tuning, no backward): the round
//     loop at decomfl_main.py:197 calls server.py train_one_step once per
//     round; its line goes 168 (the clients' local updates) → 177
//     (aggregation) → 168: two rounds, whose first allocations are events
//     2007 and 9817 (events 0–2006 set the server and clients up).
//   - maphsge4 (Llama validation): validate_old.py validate loops over two
//     batches, its body starting at line 59: events 0 and 5034.
//   - sqattn (per-layer quantization): entrance.py compress_model moves
//     each of 28 layers to the GPU at line 67 and calibrates it.
//   - nesta (one Lightning training step that OOMs in forward): no loop,
//     no optimizer step completes: no steps.
//   - wedsonlin inference, magma27, hugepanda, kkaitlyn annotations: one
//     pass each: no steps.
//   - jaspersolt: steps from its optimizer (11, the last one partial).
//   - zijiandu: segments only, no allocation history: no steps.
func TestStepsRealFiles(t *testing.T) {
	tests := []struct {
		file   string
		source result.StepSource
		site   string
		first  []int // first events; nil: only the count is checked
		count  int
	}{
		{"genF_torch2.8_zidongliu_zeroth_order_fl.pickle", result.StepsFromLoop, "server.py:168 train_one_step", []int{2007, 9817}, 2},
		{"genB_torch2.1_maphsge4_multistream_cpp.pickle", result.StepsFromLoop, "validate_old.py:59 validate", []int{0, 5034}, 2},
		{"genE_torch2.5_sqattn.pickle", result.StepsFromLoop, "entrance.py:67 compress_model", nil, 28},
		{"genC_torch2.2_nesta_OOM_pickle_named_json.pickle", result.StepsNone, "", []int{}, 0},
		{"genG_torch2.1x_wedsonlin_inference.pickle", result.StepsNone, "", []int{}, 0},
		{"genG_torch2.10x_magma27_python_stacks.pickle", result.StepsNone, "", []int{}, 0},
		{"genD_torch2.3_hugepanda.pickle", result.StepsNone, "", []int{}, 0},
		{"genE_torch2.6x_kkaitlyn_annotations.pickle", result.StepsNone, "", []int{}, 0},
		{"genC_torch2.2_jaspersolt_snapshot_entries.pickle", result.StepsFromOptimizer, "", nil, 11},
		{"genB_torch2.1_zijiandu_state_only_diffusion.pickle", result.StepsNone, "", []int{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s := analysistest.OpenShared(t, "snapshots", tt.file)
			h := history.Build(s, s.Device(0))
			p := h.Steps
			if p.Source != tt.source || p.Site != tt.site || len(p.Spans) != tt.count || len(p.FirstEvents) != tt.count {
				t.Fatalf("steps %s %q (%s), %d steps; want %s %q, %d", p.Source, p.Site, p.Evidence, len(p.Spans), tt.source, tt.site, tt.count)
			}
			if tt.first != nil && !slices.Equal(p.FirstEvents, tt.first) {
				t.Errorf("first events %v, want %v", p.FirstEvents, tt.first)
			}
			for k, sp := range p.Spans {
				if sp.StartEvent != p.FirstEvents[k] || sp.EndEvent < sp.StartEvent || k > 0 && sp.StartEvent != p.Spans[k-1].EndEvent+1 {
					t.Errorf("step %d spans events %d–%d", sp.Step, sp.StartEvent, sp.EndEvent)
				}
				if h.Phases.StepAt(sp.StartEvent) != sp.Step || h.Phases.StepAt(sp.EndEvent) != sp.Step {
					t.Errorf("events of step %d carry steps %d…%d", sp.Step, h.Phases.StepAt(sp.StartEvent), h.Phases.StepAt(sp.EndEvent))
				}
			}
		})
	}
}

// TestPhasesWithoutBackward: programs that run no backward get no backward
// phase. nesta takes a jvp inside its diffusion model's forward
// (diffusions.py t_dir → torch.autograd.functional.jvp →
// torch.autograd.grad): the autograd engine's 150 events (199–348, read by
// hand: C++ frames torch::autograd::Engine::…) belong to that forward.
// zidongliu estimates gradients from forward passes only. An evaluation
// loop under no_grad frees its last outputs after the last forward: frees
// are not a backward.
func TestPhasesWithoutBackward(t *testing.T) {
	for _, file := range []string{"genC_torch2.2_nesta_OOM_pickle_named_json.pickle", "genF_torch2.8_zidongliu_zeroth_order_fl.pickle"} {
		t.Run(file, func(t *testing.T) {
			s := analysistest.OpenShared(t, "snapshots", file)
			h := history.Build(s, s.Device(0))
			for _, sp := range h.Phases.Spans {
				if sp.Phase == result.PhaseBackward {
					t.Errorf("backward span, events %d–%d", sp.StartEvent, sp.EndEvent)
				}
			}
			if file[:4] == "genC" {
				for i := 199; i <= 348; i++ {
					if h.Phases.At(i) != result.PhaseForward {
						t.Fatalf("event %d of the jvp inside forward is %s", i, h.Phases.At(i))
					}
				}
			}
		})
	}
}

func TestStepNumbers(t *testing.T) {
	for _, tt := range []struct {
		in   []int
		want string
	}{
		{nil, "no step"},
		{[]int{3}, "step 3"},
		{[]int{1, 2, 3, 4, 5, 6, 7, 8}, "steps 1–8"},
		{[]int{1, 2, 3, 5, 7, 8}, "steps 1–3, 5, 7–8"},
		{[]int{2, 4}, "steps 2, 4"},
	} {
		if got := result.StepNumbers(tt.in); got != tt.want {
			t.Errorf("StepNumbers(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
