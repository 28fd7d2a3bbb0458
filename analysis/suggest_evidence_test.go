package analysis

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/analysis/suggest"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// suggestionIDs lists the suggestions' ids in their order.
func suggestionIDs(r *result.Result) []string {
	ids := make([]string, len(r.Suggestions))
	for i, sg := range r.Suggestions {
		ids[i] = sg.ID
	}
	return ids
}

// TestTrainingEvidenceRealFiles: whether a run trains, and whether it has a
// backward, on the real files. The frames were read with python3 pickle:
//
//   - hugepanda: every entry's stack runs octree_nca_studies.py <module> →
//     Study.py run_experiments → Agent.py train → Agent_M3DNCA_Simple.py
//     batch_step → get_outputs → Model_OctreeNCA_3d_patching2.py forward →
//     forward_train; no backward, optimizer or zero_grad frame, and the
//     recording (3,797 entries) ends inside that forward, with 2.8 GiB of
//     activations still live for the backward that did not come.
//   - zidongliu (zeroth-order federated learning): cezo_fl/server.py
//     train_one_step; no backward at all — the model is updated from forward
//     passes on perturbed parameters — while its steps call
//     Optimizer.zero_grad#SGD.zero_grad (4 annotations), after forwards.
//   - nesta: Lightning's trainer.py fit → training_step; constructorsun:
//     trainers.py train (and optimizer.zero_grad); both run out of memory in
//     forward, before their backward.
//   - sqattn, maphsge4, wedsonlin_inference, lfielike (state only): no
//     backward, no optimizer, no frame of a training loop.
func TestTrainingEvidenceRealFiles(t *testing.T) {
	tests := []struct {
		file               string
		device             int
		training, backward bool
		trainedBy          []string // one of these frames is named
	}{
		{"genD_torch2.3_hugepanda.pickle", 0, true, true, []string{"Agent.py train", "Model_OctreeNCA_3d_patching2.py forward_train"}},
		{"genF_torch2.8_zidongliu_zeroth_order_fl.pickle", 0, true, false, []string{"server.py train_one_step", "client.py _get_train_batch_iterator"}},
		{"genC_torch2.2_nesta_OOM_pickle_named_json.pickle", 0, true, true, []string{"train.py train", "language_diff_module.py training_step"}},
		{"genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle", 1, true, true, []string{"trainers.py train", "trainers.py __init__"}},
		{"genE_torch2.5_sqattn.pickle", 0, false, false, nil},
		{"genB_torch2.1_maphsge4_multistream_cpp.pickle", 0, false, false, nil},
		{"genG_torch2.1x_wedsonlin_inference.pickle", 0, false, false, nil},
		{"genD_torch2.4_lfielike_state_only.pickle", 0, false, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			s := analysistest.OpenShared(t, "snapshots", tc.file)
			h := history.Build(s, s.Device(tc.device))
			dr := deviceResult(h, DefaultOptions())
			ev := suggest.Gather(h, &dr)
			if ev.Training != tc.training || ev.Backward != tc.backward {
				t.Errorf("training %v, backward %v; want %v, %v", ev.Training, ev.Backward, tc.training, tc.backward)
			}
			if tc.trainedBy == nil && ev.TrainedBy != "" || tc.trainedBy != nil && !slices.Contains(tc.trainedBy, ev.TrainedBy) {
				t.Errorf("training frame %q, want one of %q", ev.TrainedBy, tc.trainedBy)
			}
			r := Analyze(s, DefaultOptions())
			for _, sg := range r.Suggestions {
				if tc.training && strings.Contains(sg.Because, "nothing") {
					t.Errorf("a training run is told %q", sg.Because)
				}
				if !tc.backward && (sg.ID == "activation_checkpointing" || sg.ID == "gradient_accumulation") {
					t.Errorf("a run without backward gets %s: %s", sg.ID, sg.Because)
				}
			}
		})
	}
}

// TestHugepandaSuggestions: a training step's forward (hugepanda) gets the
// training fixes, not "process smaller batches; nothing here is trained" —
// but not checkpointing: its peak is 13.3 GiB of temporaries that forward
// frees itself (its update loop's intermediates) and no activation kept
// for backward, so there is nothing to recompute;
// its 7.18 GiB of cached memory at the peak is 98% wholly free segments, so
// expandable segments are not offered (115,256,320 B of fragmentation); and
// empty_cache, whose 17,079,205,888 B (the cached segments without a live
// block at the end, testdata/facts/allocator_state_facts.py) are more than
// any other saving, comes last: it does not lower the peak.
func TestHugepandaSuggestions(t *testing.T) {
	r := Analyze(analysistest.OpenShared(t, "snapshots", "genD_torch2.3_hugepanda.pickle"), DefaultOptions())
	want := []string{"gradient_accumulation", "empty_cache"}
	if diff := cmp.Diff(want, suggestionIDs(r)); diff != "" {
		t.Errorf("suggestions (-want +got):\n%s", diff)
	}
	last := r.Suggestions[len(r.Suggestions)-1]
	if last.EstimatedSavingsBytes != 17_079_205_888 || last.EstimatedSavingsBytes <= r.Suggestions[0].EstimatedSavingsBytes {
		t.Errorf("empty_cache saves %d, want 17,079,205,888, more than %s's %d", last.EstimatedSavingsBytes, r.Suggestions[0].ID, r.Suggestions[0].EstimatedSavingsBytes)
	}
}

// TestEmptyCacheAfterPeakFixes: magma27 (a training step with python
// stacks) ends with 11,773,411,328 B of cached segments without a live block
// (allocator_state_facts.py); empty_cache claims exactly those — not
// reserved − allocated (12.8 GB, which counts free space inside segments in
// use that empty_cache cannot release) — and ranks after checkpointing,
// accumulation and FlashAttention although it claims more than any of them.
func TestEmptyCacheAfterPeakFixes(t *testing.T) {
	r := Analyze(analysistest.OpenShared(t, "snapshots", "genG_torch2.10x_magma27_python_stacks.pickle"), DefaultOptions())
	ids := suggestionIDs(r)
	if len(ids) < 2 || ids[len(ids)-1] != "empty_cache" {
		t.Fatalf("suggestions %v: want empty_cache last", ids)
	}
	ec := r.Suggestions[len(ids)-1]
	if ec.EstimatedSavingsBytes != 11_773_411_328 {
		t.Errorf("empty_cache saves %d, want 11,773,411,328", ec.EstimatedSavingsBytes)
	}
	for _, sg := range r.Suggestions[:len(ids)-1] {
		if sg.EstimatedSavingsBytes >= ec.EstimatedSavingsBytes {
			t.Errorf("%s saves %d, not less than empty_cache: the file does not test the ranking", sg.ID, sg.EstimatedSavingsBytes)
		}
	}
}

// TestExpandableSegmentsFragmentationOnly: the four real files that were
// offered expandable segments for their cached memory at the peak (7.18,
// 5.98, 1.78 and 1.35 GiB: reserved − allocated, which in allocator blocks
// is exactly the cached free bytes of allocator_state_facts.py) hold mostly
// wholly free segments there; their fragmentation — free space inside segments with
// live blocks (allocator_state_facts.py) — is far smaller, below what the
// suggestion needs (1 GiB and a quarter of the reserved memory).
func TestExpandableSegmentsFragmentationOnly(t *testing.T) {
	tests := []struct {
		file       string
		claimed    int64 // the saving claimed before: reserved − allocated (blocks) at the peak
		fragmented int64
	}{
		{"genB_torch2.1_zijiandu_state_only_diffusion.pickle", 7_687_782_912, 1_379_549_696},
		{"genD_torch2.3_hugepanda.pickle", 6_421_392_384, 115_256_320},
		{"genA_torch2.0_yiyi_1.3b_snapshot.pickle", 1_916_120_064, 435_530_752},
		{"genE_torch2.5_sqattn.pickle", 1_450_009_600, 11_363_328},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			s := analysistest.OpenShared(t, "snapshots", tc.file)
			h := history.Build(s, s.Devices[0])
			dr := deviceResult(h, DefaultOptions())
			ev := suggest.Gather(h, &dr)
			if got := dr.Peak.ReservedBytes - dr.Peak.AllocatedBytes; got != tc.claimed {
				t.Errorf("reserved − allocated at the peak %d, want %d", got, tc.claimed)
			}
			if ev.PeakFragmented != tc.fragmented {
				t.Errorf("fragmentation at the peak %d, want %d", ev.PeakFragmented, tc.fragmented)
			}
			if slices.Contains(suggestionIDs(Analyze(s, DefaultOptions())), "expandable_segments") {
				t.Error("expandable_segments suggested for wholly free cached segments")
			}
		})
	}
}

// TestSuggestionsFixtures: simulated runs made like the real ones.
func TestSuggestionsFixtures(t *testing.T) {
	tests := []struct {
		name    string
		build   func(s *st.Sim)
		want    []string
		dont    []string
		saving  map[string]int64 // estimated savings of some suggestions
		because map[string]string
	}{
		{
			// An inference server runs out of memory in its forward: no
			// backward, nothing to recompute or accumulate.
			name: "inference OOM in forward",
			build: func(s *st.Sim) {
				call := s.F("/usr/lib/python3/site-packages/torch/nn/modules/module.py", 1750, "_call_impl")
				fwd := s.Stack(s.F("model.py", 40, "forward"), call, s.F("serve.py", 12, "generate"), s.F("serve.py", 30, "<module>"))
				for i := 0; i < 4; i++ {
					s.Alloc(0, 64*mib, s.Stack(s.F("serve.py", 8, "load_model"), s.F("serve.py", 29, "<module>")))
				}
				for i := 0; i < 12; i++ {
					s.Alloc(0, 96*mib, fwd)
				}
				s.OOM(0, 512*mib, 100*mib, fwd)
			},
			want: []string{"reduce_batch_size"},
			dont: []string{"activation_checkpointing", "gradient_accumulation"},
		},
		{
			// Zeroth-order training (like zidongliu): each step calls
			// zero_grad, perturbs the parameters outside any module and runs
			// a forward under no_grad (each layer's output freed once the
			// next is made); no backward ever runs, and the dump is taken in
			// a forward.
			name: "zeroth-order training",
			build: func(s *st.Sim) {
				call := s.F("/usr/lib/python3/site-packages/torch/nn/modules/module.py", 1750, "_call_impl")
				step := s.F("server.py", 90, "train_one_step")
				fwd := s.Stack(s.F("model.py", 40, "forward"), call, s.F("zo.py", 20, "loss_at"), step)
				perturb := s.Stack(s.F("zo.py", 50, "perturb_parameters"), step)
				var out, logits, noise uint64
				for i := 0; i < 3; i++ {
					s.Annotate(0, "Optimizer.zero_grad#SGD.zero_grad", func() {})
					next := s.Alloc(0, 32*mib, perturb)
					x := s.Alloc(0, 40*mib, fwd)
					if out != 0 { // the previous step's outputs are dropped
						s.Free(0, out)
						s.Free(0, logits)
						s.Free(0, noise)
					}
					noise = next
					for k := 0; k < 6; k++ {
						y := s.Alloc(0, 40*mib, fwd)
						s.Free(0, x)
						x = y
					}
					out, logits = x, s.Alloc(0, 8*mib, fwd)
				}
			},
			want:    []string{"reduce_batch_size"},
			dont:    []string{"activation_checkpointing", "gradient_accumulation", "quantize_weights"},
			because: map[string]string{"reduce_batch_size": "no backward keeps them"},
		},
		{
			// A training step whose recording ends in its forward (like
			// hugepanda): the backward will need the activations.
			name: "training forward, recording cut",
			build: func(s *st.Sim) {
				call := s.F("/usr/lib/python3/site-packages/torch/nn/modules/module.py", 1750, "_call_impl")
				fwd := s.Stack(s.F("model.py", 40, "forward_train"), call, s.F("agent.py", 70, "batch_step"), s.F("agent.py", 30, "train"))
				for k := 0; k < 10; k++ {
					s.Alloc(0, 40*mib, fwd)
				}
			},
			want: []string{"activation_checkpointing", "gradient_accumulation"},
			dont: []string{"reduce_batch_size"},
		},
		{
			// Fragmentation at the peak: two 9 MiB blocks share each of 200
			// 20 MiB segments (2 MiB split off), then the first of each pair
			// is freed: 11 MiB free in every segment still in use. 150
			// blocks of 16 MiB (their own segments) then make the peak, beside
			// 512 MiB of wholly free small-pool segments. Expandable segments
			// save the 200 × 11 MiB only.
			name: "fragmented peak",
			build: func(s *st.Sim) {
				stack := s.Stack(s.F("model.py", 40, "forward"), s.F("serve.py", 12, "generate"))
				var small, first []uint64
				for i := 0; i < 512; i++ {
					small = append(small, s.Alloc(0, mib, stack))
				}
				for _, b := range small {
					s.Free(0, b)
				}
				for i := 0; i < 200; i++ {
					first = append(first, s.Alloc(0, 9*mib, stack))
					s.Alloc(0, 9*mib, stack)
				}
				for _, b := range first {
					s.Free(0, b)
				}
				for i := 0; i < 150; i++ {
					s.Alloc(0, 16*mib, stack)
				}
			},
			want:   []string{"expandable_segments"},
			saving: map[string]int64{"expandable_segments": 200 * 11 * mib},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := st.NewSim()
			tc.build(s)
			r := Analyze(analysistest.Read(t, s, 0), DefaultOptions())
			ids := suggestionIDs(r)
			for _, id := range tc.want {
				if !slices.Contains(ids, id) {
					t.Errorf("suggestions %v lack %s", ids, id)
				}
			}
			for _, id := range tc.dont {
				if slices.Contains(ids, id) {
					t.Errorf("suggestions %v include %s", ids, id)
				}
			}
			for _, sg := range r.Suggestions {
				if want, ok := tc.saving[sg.ID]; ok && sg.EstimatedSavingsBytes != want {
					t.Errorf("%s saves %d, want %d", sg.ID, sg.EstimatedSavingsBytes, want)
				}
				if want, ok := tc.because[sg.ID]; ok && !strings.Contains(sg.Because, want) {
					t.Errorf("%s because %q lacks %q", sg.ID, sg.Because, want)
				}
			}
		})
	}
}
