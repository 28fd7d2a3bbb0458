package analysis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/analysis/suggest"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// TestFrameworkBuffers: Megatron's distributed data-parallel buffers — the
// parameter buffer (with the distributed optimizer) and, at a later line of
// the same __init__, the gradient buffer — and the distributed optimizer's
// fp32 main parameters are parameter, gradient and optimizer state. Only
// Megatron's own frames tell them; the user's, C++ or no frames do not.
func TestFrameworkBuffers(t *testing.T) {
	for _, kind := range frameKinds {
		for _, numel := range []int64{64 << 20, 300 << 20} {
			t.Run(fmt.Sprintf("%s, %d elements", kind, numel), func(t *testing.T) {
				x := fx{st.NewSim(), kind}
				s := x.s
				user := []*st.Dict{s.F("pretrain_gpt.py", 300, "<module>")}
				buf := func(line int) *st.List {
					return x.stack([]string{"at::native::zeros(c10::ArrayRef<long>)"}, []*st.Dict{
						s.F("megatron/core/distributed/param_and_grad_buffer.py", line, "__init__"),
						s.F("megatron/core/distributed/distributed_data_parallel.py", 230, "_allocate_buffers_for_parameters")}, user)
				}
				main := x.stack([]string{"at::native::clone(at::Tensor const&)"}, []*st.Dict{
					s.F("megatron/core/optimizer/distrib_optimizer.py", 410, "_build_model_and_main_param_groups"),
					s.F("megatron/core/optimizer/distrib_optimizer.py", 520, "__init__")}, user)
				s.Alloc(0, numel*2, buf(622)) // param_data, bf16
				s.Alloc(0, numel*4, buf(629)) // grad_data, fp32
				s.Alloc(0, numel*4/8, main)   // this rank's shard of fp32 main parameters (8 ranks)
				snap := analysistest.Read(t, s, 0)
				got := requestedAtEndOf(history.Build(snap, snap.Device(0)))
				if kind != "module frames" {
					if got[result.Gradient] != 0 || got[result.OptimizerState] != 0 {
						t.Errorf("gradient %d, optimizer_state %d without Megatron's frames", got[result.Gradient], got[result.OptimizerState])
					}
					return
				}
				if got[result.Parameter] != numel*2 || got[result.Gradient] != numel*4 || got[result.OptimizerState] != numel/2 {
					t.Errorf("parameter %d, gradient %d, optimizer_state %d; want %d, %d, %d", got[result.Parameter], got[result.Gradient], got[result.OptimizerState], numel*2, numel*4, numel/2)
				}
			})
		}
	}
}

// TestDumpWithoutHistory: a dump with the state only (no trace entries)
// still says what the allocator caches: the free bytes, in how many
// blocks, the largest — whatever its frames — and that it is the state at
// the dump.
func TestDumpWithoutHistory(t *testing.T) {
	for _, kind := range frameKinds {
		for _, n := range []int{4, 40} {
			t.Run(fmt.Sprintf("%s, %d tensors", kind, n), func(t *testing.T) {
				x := fx{st.NewSim(), kind}
				s := x.s
				s.NoTrace = true
				stack := x.stack(cppAddmm, []*st.Dict{s.F("torch/nn/modules/linear.py", 125, "forward")}, []*st.Dict{s.F("serve.py", 9, "main")})
				var addrs []uint64
				for i := 0; i < n; i++ {
					addrs = append(addrs, s.Alloc(0, int64(3+i%5)<<20, stack))
				}
				for i := 0; i < n; i += 2 { // every other one freed: free pieces between live blocks
					s.Free(0, addrs[i])
				}
				snap := analysistest.Read(t, s, 0)
				r := Analyze(snap, DefaultOptions())
				d := r.Devices[0]
				var free, largest int64
				pieces := 0
				for _, g := range snap.Device(0).Segments {
					for _, b := range g.Blocks {
						if b.State.String() == "inactive" {
							free += b.Size
							largest = max(largest, b.Size)
							pieces++
						}
					}
				}
				fr := d.AtEnd.Fragmentation
				if !d.NoHistory || fr == nil {
					t.Fatalf("no history %v, fragmentation %v", d.NoHistory, fr)
				}
				if fr.CachedFreeBytes != free || fr.FreeBlocks != pieces || fr.LargestFreeBlockBytes != largest || free != d.AtEnd.ReservedBytes-d.AtEnd.AllocatedBytes {
					t.Errorf("cached %d in %d blocks, largest %d; the dump says %d in %d, largest %d", fr.CachedFreeBytes, fr.FreeBlocks, fr.LargestFreeBlockBytes, free, pieces, largest)
				}
			})
		}
	}
}

// TestWeightsBeforeTheirGradientAtOOM: a training run recorded after its
// model was built runs out of memory in backward, after the gradients of
// its last layers and before those of its first: the first layers' weights
// are still weights, not unknown memory — whatever the stacks.
func TestWeightsBeforeTheirGradientAtOOM(t *testing.T) {
	for _, kind := range frameKinds {
		for _, layers := range []int{4, 12} {
			t.Run(fmt.Sprintf("%s, %d layers", kind, layers), func(t *testing.T) {
				x := fx{st.NewSim(), kind}
				s := x.s
				initSt := x.stack([]string{"at::native::empty_cuda(c10::ArrayRef<long>)"}, []*st.Dict{s.F("torch/nn/modules/linear.py", 106, "__init__")}, []*st.Dict{s.F("train.py", 10, "<module>")})
				s.NoTrace = true
				var weights []int64
				var total int64
				for l := 0; l < layers; l++ {
					w := int64(l+1) << 22 // sizes differ: a gradient pairs with its own weight
					s.Alloc(0, w, initSt)
					weights = append(weights, w)
					total += w
				}
				s.NoTrace = false
				fwd := x.stack(cppAddmm, []*st.Dict{s.F("torch/nn/modules/linear.py", 125, "forward")}, []*st.Dict{s.F("model.py", 40, "forward"), s.F("train.py", 21, "<module>")})
				var saved []uint64
				s.Annotate(0, "## forward ##", func() {
					for range layers {
						saved = append(saved, s.Alloc(0, 8<<20, fwd))
					}
				})
				s.Annotate(0, "backward", func() {
					bwd := x.stack(cppMmBwd, nil, nil)
					for l := layers - 1; l >= layers/2; l-- {
						s.Alloc(0, weights[l], bwd) // the gradient
						s.Free(0, saved[l])
					}
					s.OOM(0, 1<<30, 0, bwd)
				})
				snap := analysistest.Read(t, s, 0)
				r := Analyze(snap, DefaultOptions())
				o := r.Devices[0].OOM
				if o == nil {
					t.Fatal("no OOM")
				}
				if o.Categories[result.Parameter] != total || o.Categories[result.Unknown] != 0 {
					t.Errorf("at the OOM parameter %d, unknown %d; want every weight (%d) a parameter", o.Categories[result.Parameter], o.Categories[result.Unknown], total)
				}
			})
		}
	}
}

// TestCUDAGraphPool: a forward captured in a CUDA graph allocates from the
// graph's private pool: what the pool holds is cuda_graph_pool (the static
// output, live while the graph lives; during the capture the
// intermediates too), and a note says what the pool reserves and how much
// of it is free for the graph only. The pool is the dump's own fact: every
// stack shape tells it.
func TestCUDAGraphPool(t *testing.T) {
	for _, kind := range frameKinds {
		for _, layers := range []int{2, 6} {
			t.Run(fmt.Sprintf("%s, %d layers", kind, layers), func(t *testing.T) {
				x := fx{st.NewSim(), kind}
				s := x.s
				fwd := x.stack(cppAddmm, []*st.Dict{s.F("torch/nn/modules/linear.py", 125, "forward")}, []*st.Dict{s.F("model.py", 40, "forward"), s.F("serve.py", 20, "main")})
				run := func() uint64 {
					h := s.Alloc(0, 64<<20, fwd)
					for range layers {
						n := s.Alloc(0, 256<<20, fwd)
						s.Free(0, h)
						h = s.Alloc(0, 64<<20, fwd)
						s.Free(0, n)
					}
					return h
				}
				s.Stream = 1 // warm-up on a side stream
				s.Free(0, run())
				s.Stream, s.Pool = 2, [2]int64{1, 0} // torch.cuda.graph: the capture stream, the graph's pool
				out := run()
				s.Stream, s.Pool = 0, [2]int64{}
				_ = out
				snap := analysistest.Read(t, s, 0)
				r := Analyze(snap, DefaultOptions())
				d := r.Devices[0]
				var reserved, alloc int64
				for _, g := range snap.Device(0).Segments {
					if g.PoolID[0] > 0 {
						reserved += g.TotalSize
						alloc += g.AllocatedSize
					}
				}
				if got := d.AtEnd.Categories[result.CUDAGraphPool]; got != alloc || alloc != 64<<20 {
					t.Errorf("cuda_graph_pool at the end %d, the pool's allocated %d (want the 64 MiB output)", got, alloc)
				}
				h := history.Build(snap, snap.Device(0))
				var most int64
				for i := range h.Device.Events {
					most = max(most, h.CategoriesAt(i)[result.CUDAGraphPool])
				}
				if most != (64+256)<<20 { // the output so far and a layer's intermediate
					t.Errorf("cuda_graph_pool during the capture %d: the capture's intermediates are the pool's too", most)
				}
				note := ""
				for _, dg := range r.Diagnostics {
					if dg.Kind == "cuda_graph_pool" {
						note = dg.Message
					}
				}
				if !strings.Contains(note, units.FormatBytes(reserved)) || !strings.Contains(note, units.FormatBytes(reserved-alloc)+" free") {
					t.Errorf("note %q does not say %s reserved, %s free", note, units.FormatBytes(reserved), units.FormatBytes(reserved-alloc))
				}
			})
		}
	}
}

// suggestionIn returns the suggestion with the id, or nil.
func suggestionIn(r *result.Result, id string) *result.Suggestion {
	for i := range r.Suggestions {
		if r.Suggestions[i].ID == id {
			return &r.Suggestions[i]
		}
	}
	return nil
}

// checkSavingsAreWhatIfs: every suggestion whose technique the what-if
// projects states the what-if's saving.
func checkSavingsAreWhatIfs(t *testing.T, r *result.Result) {
	t.Helper()
	if r.WhatIf == nil {
		return
	}
	for _, p := range r.WhatIf.Suggestions {
		if sg := suggestionIn(r, p.ID); p.Method == "technique" && (sg == nil || sg.EstimatedSavingsBytes != p.SavingBytes) {
			t.Errorf("%s: the suggestion saves %v, the what-if %d", p.ID, sg, p.SavingBytes)
		}
	}
}

// TestAdviceFollows: suggestions follow from the categories. At an OOM
// where the weights, gradients and optimizer state leave less room than
// the failed request, what shrinks them comes first and checkpointing
// (activations under 10% of the memory) is not offered; weights already
// quantized get no quantization; QLoRA only for a run that fine-tunes
// loaded weights; nothing the run already does (checkpointing, autocast)
// is suggested; every saving is the what-if's.
func TestAdviceFollows(t *testing.T) {
	for _, kind := range frameKinds {
		t.Run(kind+", states leave no room", func(t *testing.T) {
			x := fx{st.NewSim(), kind}
			c := trainRun{layers: 4, hidden: 4096, tokens: 256, steps: 2}
			c.run(x)
			s := x.s
			fwd := x.stack(cppAddmm, []*st.Dict{s.F("torch/nn/modules/linear.py", 125, "forward")}, []*st.Dict{s.F("model.py", 40, "forward"), s.F("train.py", 21, "<module>")})
			s.Annotate(0, "## forward ##", func() {
				s.Alloc(0, 16<<20, fwd)
				s.OOM(0, 2<<30, 256<<20, fwd) // 2 GiB asked, 256 MiB left: the states fill the device
			})
			r := Analyze(analysistest.Read(t, s, 0), DefaultOptions())
			if len(r.Suggestions) == 0 || !suggest.ShrinksStates(r.Suggestions[0].ID) || suggestionIn(r, "activation_checkpointing") != nil {
				t.Errorf("suggestions %v: want what shrinks the states first, no checkpointing", suggestionIDs(r))
			}
			checkSavingsAreWhatIfs(t, r)
		})
		for _, frame := range []*struct{ file, name, not string }{
			{"bitsandbytes/nn/modules.py", "forward", "quantize_weights"},
			{"auto_gptq/nn_modules/qlinear/qlinear_cuda.py", "forward", "quantize_weights"},
			{"awq/modules/linear/gemm.py", "forward", "quantize_weights"},
			{"torch/utils/checkpoint.py", "checkpoint", "activation_checkpointing"},
		} {
			t.Run(fmt.Sprintf("%s, %s", kind, frame.file), func(t *testing.T) {
				x := fx{st.NewSim(), kind}
				c := trainRun{layers: 4, hidden: 2048, tokens: 8192, steps: 2, inference: frame.not == "quantize_weights"}
				c.run(x)
				s := x.s
				st0 := x.stack(cppAddmm, []*st.Dict{s.F(frame.file, 50, frame.name)}, []*st.Dict{s.F("run.py", 9, "main")})
				s.Free(0, s.Alloc(0, 1<<20, st0))
				r := Analyze(analysistest.Read(t, s, 0), DefaultOptions())
				if kind == "module frames" && suggestionIn(r, frame.not) != nil {
					t.Errorf("%s suggested with %s in the stacks", frame.not, frame.file)
				}
				checkSavingsAreWhatIfs(t, r)
			})
		}
		t.Run(kind+", quantization unknown without frames", func(t *testing.T) {
			// Inference whose weights dominate: the advice to quantize them
			// says, when the file records no frame, that it cannot tell
			// whether they are quantized already — and only then.
			x := fx{st.NewSim(), kind}
			c := trainRun{layers: 4, hidden: 2048, tokens: 64, steps: 2, inference: true}
			c.run(x)
			r := Analyze(analysistest.Read(t, x.s, 0), DefaultOptions())
			sg := suggestionIn(r, "quantize_weights")
			if sg == nil {
				if kind == "no frames" || kind == "C++ frames" {
					t.Errorf("no quantize_weights (%v)", suggestionIDs(r))
				}
				return // the fixture's script is train.py: a training loop's name in Python frames
			}
			if got, want := strings.Contains(sg.Because, "quantized already is not known"), kind == "no frames"; got != want {
				t.Errorf("says the quantization is unknown: %v, want %v (%s)", got, want, sg.Because)
			}
		})
		t.Run(kind+", QLoRA needs loaded weights", func(t *testing.T) {
			for _, pretrained := range []bool{false, true} {
				x := fx{st.NewSim(), kind}
				c := trainRun{layers: 2, hidden: 1024, tokens: 64, steps: 2, frozen: 64} // LoRA-like: the base is frozen
				c.run(x)
				s := x.s
				if pretrained {
					s.Free(0, s.Alloc(0, 1<<20, x.stack(nil, []*st.Dict{s.F("transformers/modeling_utils.py", 4000, "from_pretrained")}, []*st.Dict{s.F("train.py", 5, "<module>")})))
				}
				r := Analyze(analysistest.Read(t, s, 0), DefaultOptions())
				if got, want := suggestionIn(r, "qlora") != nil, pretrained && kind == "module frames"; got != want {
					t.Errorf("pretrained %v: qlora %v, want %v (%v)", pretrained, got, want, suggestionIDs(r))
				}
				checkSavingsAreWhatIfs(t, r)
			}
		})
	}
}

// TestGradientAccumulationFixture: a run that steps its optimizer (and
// zero_grad) every 4 micro-batches keeps its gradients through the next
// micro-batches' forward and backward on purpose. They are not "the
// previous step's gradients" to free before the forward (no set_to_none,
// nothing stale in the what-if), and where activations dominate, the
// advice to accumulate says the run does already. The same run stepping
// every micro-batch but calling zero_grad after the next forward is told
// to free them.
func TestGradientAccumulationFixture(t *testing.T) {
	for _, kind := range frameKinds {
		for _, tokens := range []int64{512, 16384} {
			t.Run(fmt.Sprintf("%s, %d tokens", kind, tokens), func(t *testing.T) {
				c := trainRun{layers: 8, hidden: 1024, tokens: tokens, steps: 8, accum: 4, ws: 32 << 20}
				x := fx{st.NewSim(), kind}
				c.run(x)
				r := Analyze(analysistest.Read(t, x.s, 0), DefaultOptions())
				if sg := suggestionIn(r, "set_to_none"); sg != nil {
					t.Errorf("set_to_none for accumulated gradients: %s", sg.Because)
				}
				for _, p := range r.WhatIf.Suggestions {
					if p.ID == "set_to_none" {
						t.Errorf("what-if of set_to_none: %+v", p)
					}
				}
				if sg := suggestionIn(r, "gradient_accumulation"); sg != nil && !strings.Contains(sg.Title, "twice as many") {
					t.Errorf("a run that accumulates told to start: %s", sg.Title)
				} else if sg == nil && tokens > 8192 {
					t.Errorf("no gradient_accumulation where activations dominate (%v)", suggestionIDs(r))
				}
				checkSavingsAreWhatIfs(t, r)
			})
		}
		t.Run(kind+", zero_grad after the next forward", func(t *testing.T) {
			c := trainRun{layers: 8, hidden: 1024, tokens: 512, steps: 4, lateZero: true, ws: 32 << 20}
			x := fx{st.NewSim(), kind}
			c.run(x)
			r := Analyze(analysistest.Read(t, x.s, 0), DefaultOptions())
			if sg := suggestionIn(r, "set_to_none"); sg == nil || !strings.Contains(sg.Because, units.FormatBytes(c.weightBytes)+" of the previous step's gradients") {
				t.Errorf("set_to_none %+v (suggestions %v): the previous step's %d B of gradients live through the forward", sg, suggestionIDs(r), c.weightBytes)
			}
			checkSavingsAreWhatIfs(t, r)
		})
	}
}
