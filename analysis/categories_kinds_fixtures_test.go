package analysis

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// liveBy sums, among the blocks live at the end, the allocator bytes and
// the requested bytes of one category.
func liveBy(h *history.History, c result.Category) (bytes, requested int64, blocks int) {
	for _, b := range h.LiveBlocks(h.EndIndex()) {
		if b.Category == c {
			bytes += b.Size
			requested += b.Requested
			blocks++
		}
	}
	return
}

// TestModuleInitWeights: the recipe of Hugging Face's memory blog post
// ("Visualize and understand GPU memory in PyTorch"): nn.Linear(10_000,
// 50_000, device="cuda"), then three forwards of a fresh input. The weight
// and bias are allocated by torch/nn/modules/linear.py __init__, before
// any forward: parameters, whatever the phase — also for a module a forward
// builds lazily, and for other layer types and sizes.
func TestModuleInitWeights(t *testing.T) {
	tests := []struct {
		name      string
		layer     string // file under torch/nn/modules/
		in, out   int64
		lazy      bool // created inside the model's forward
		iteration int
	}{
		{"blog post recipe", "linear.py", 10_000, 50_000, false, 3},
		{"a conv layer, two iterations", "conv.py", 512, 4096, false, 2},
		{"built inside forward", "linear.py", 1024, 4096, true, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := st.NewSim()
			script := s.F("blog.py", 7, "<module>")
			init := s.Stack(s.F("torch/nn/modules/"+tc.layer, 105, "__init__"), script)
			call := s.F("torch/nn/modules/module.py", 1750, "_call_impl")
			fwd := s.Stack(s.F("torch/nn/modules/"+tc.layer, 125, "forward"), call, s.F("blog.py", 10, "<module>"))
			if tc.lazy {
				init = s.Stack(s.F("torch/nn/modules/"+tc.layer, 105, "__init__"), s.F("model.py", 20, "forward"), call, s.F("blog.py", 10, "<module>"))
			}
			weight, bias := tc.in*tc.out*4, tc.out*4
			var params []uint64
			if !tc.lazy {
				params = append(params, s.Alloc(0, weight, init), s.Alloc(0, bias, init))
			}
			var x, y uint64
			for i := 0; i < tc.iteration; i++ {
				nx := s.Alloc(0, 5000*tc.in*4, s.Stack(s.F("torch/_tensor.py", 1, "randn"), s.F("blog.py", 9, "<module>")))
				if x != 0 {
					s.Free(0, x)
				}
				x = nx
				if tc.lazy && i == 0 {
					params = append(params, s.Alloc(0, weight, init), s.Alloc(0, bias, init))
				}
				ny := s.Alloc(0, 5000*tc.out*4, fwd)
				if y != 0 {
					s.Free(0, y)
				}
				y = ny
			}
			snap := analysistest.Read(t, s, 0)
			h := history.Build(snap, snap.Devices[0])
			bytes, req, n := liveBy(h, result.Parameter)
			if n != 2 || req != weight+bias || bytes != analysistest.SimBlocks(t, h.Device, params) {
				t.Errorf("parameters: %d blocks, %d B requested, %d B; want 2, %d, %d", n, req, bytes, weight+bias, analysistest.SimBlocks(t, h.Device, params))
			}
			for _, b := range h.LiveBlocks(h.EndIndex()) {
				if b.Category == result.Parameter && b.Rule() != history.RuleModuleInit {
					t.Errorf("parameter by rule %s, want %s", b.Rule(), history.RuleModuleInit)
				}
			}
		})
	}
}

// TestKVCache: an inference server's key/value cache is a kind of its own,
// neither parameters nor activations. vLLM's cache engine allocates it once
// after loading the model (cache_engine.py _allocate_kv_cache, one tensor
// per layer); transformers' DynamicCache grows it in every generation step
// (cache_utils.py update, under the attention's forward), freeing the
// previous tensors.
func TestKVCache(t *testing.T) {
	for _, layers := range []int{4, 32} {
		t.Run(fmt.Sprintf("vLLM, %d layers", layers), func(t *testing.T) {
			s := st.NewSim()
			load := s.Stack(s.F("vllm/model_executor/layers/linear.py", 310, "create_weights"), s.F("vllm/model_executor/model_loader/loader.py", 390, "load_model"), s.F("serve.py", 12, "main"))
			kv := s.Stack(s.F("vllm/worker/cache_engine.py", 84, "_allocate_kv_cache"), s.F("vllm/worker/cache_engine.py", 64, "__init__"),
				s.F("vllm/worker/worker.py", 260, "_init_cache_engine"), s.F("serve.py", 13, "main"))
			fwd := s.Stack(s.F("vllm/model_executor/models/llama.py", 300, "forward"), s.F("torch/nn/modules/module.py", 1750, "_call_impl"), s.F("serve.py", 20, "main"))
			for l := 0; l < layers; l++ {
				s.Alloc(0, 64<<20, load)
			}
			var cache []uint64
			for l := 0; l < layers; l++ {
				cache = append(cache, s.Alloc(0, 2*16384*16*8*128*2, kv))
			}
			for i := 0; i < 4; i++ {
				a := s.Alloc(0, 8<<20, fwd)
				s.Free(0, a)
			}
			snap := analysistest.Read(t, s, 0)
			h := history.Build(snap, snap.Devices[0])
			bytes, _, n := liveBy(h, result.KVCache)
			if n != layers || bytes != analysistest.SimBlocks(t, h.Device, cache) {
				t.Errorf("kv_cache %d blocks, %d B; want %d, %d", n, bytes, layers, analysistest.SimBlocks(t, h.Device, cache))
			}
			if p, _, _ := liveBy(h, result.Parameter); p > int64(layers)*64<<20 {
				t.Errorf("parameters %d B: more than the %d weights", p, layers)
			}
			r := Analyze(snap, DefaultOptions())
			for _, sg := range r.Suggestions {
				if sg.EstimatedSavingsBytes > int64(layers)*64<<20 {
					t.Errorf("suggestion %s saves %d, more than the weights: it counts the KV cache", sg.ID, sg.EstimatedSavingsBytes)
				}
			}
		})
	}
	t.Run("transformers DynamicCache", func(t *testing.T) {
		s := st.NewSim()
		call := s.F("torch/nn/modules/module.py", 1750, "_call_impl")
		gen := s.F("generate.py", 30, "main")
		attn := s.F("transformers/models/llama/modeling_llama.py", 330, "forward")
		update := s.Stack(s.F("transformers/cache_utils.py", 420, "update"), attn, call, gen)
		scores := s.Stack(s.F("torch/nn/functional.py", 2140, "softmax"), attn, call, gen)
		const layers = 4
		keys := make([]uint64, 2*layers)
		var last int64
		for tok := int64(1); tok <= 6; tok++ {
			for l := 0; l < 2*layers; l++ {
				size := tok * 8 * 128 * 2 * 4096 / 8
				n := s.Alloc(0, size, update)
				if keys[l] != 0 {
					s.Free(0, keys[l])
				}
				keys[l] = n
				last = size
				a := s.Alloc(0, tok*4096, scores)
				s.Free(0, a)
			}
		}
		snap := analysistest.Read(t, s, 0)
		h := history.Build(snap, snap.Devices[0])
		bytes, req, n := liveBy(h, result.KVCache)
		if n != 2*layers || req != 2*layers*last || bytes != analysistest.SimBlocks(t, h.Device, keys) {
			t.Errorf("kv_cache %d blocks, %d B requested, %d B; want %d, %d, %d", n, req, bytes, 2*layers, 2*layers*last, analysistest.SimBlocks(t, h.Device, keys))
		}
	})
}

// TestStateOnlyDDPOOMDump: the dump a DDP training job's OOM handler wrote
// with enabled="state" and no stacks (context=None): segments only, no
// frames. Parameters, gradients, DDP's gradient buckets and AdamW's state
// are all there, and nothing in the file tells them apart: unknown, with a
// note saying so, and no suggestion that assumes weights (quantization,
// "nothing is trained").
func TestStateOnlyDDPOOMDump(t *testing.T) {
	for _, layers := range []int{6, 24} {
		t.Run(fmt.Sprintf("%d layers", layers), func(t *testing.T) {
			s := st.NewSim()
			s.StateOnly = true
			var total int64
			for l := 0; l < layers; l++ {
				for _, sz := range []int64{4 * mib, 4 * mib, 16 * mib, 16 * mib} {
					for range 4 { // parameter, gradient, exp_avg, exp_avg_sq
						s.Alloc(0, sz, nil)
						total += sz
					}
				}
			}
			s.Alloc(0, 25*mib, nil) // DDP's gradient bucket
			total += 25 * mib
			snap := analysistest.Read(t, s, 0)
			r := Analyze(snap, DefaultOptions())
			c := r.Devices[0].AtEnd.Categories
			if c[result.Unknown] != c.Total() || c.Total() < total {
				t.Errorf("at the end %v: want all %d B unknown", c, total)
			}
			if !hasDiag(r, "no_frames_no_history") {
				t.Errorf("no no_frames_no_history note: %v", r.Diagnostics)
			}
			for _, sg := range r.Suggestions {
				if sg.ID == "quantize_weights" || sg.ID == "qlora" || strings.Contains(sg.Because, "nothing is trained") {
					t.Errorf("suggestion %s: %s", sg.ID, sg.Because)
				}
			}
		})
	}
}

// TestAdamWGradientsFromBeforeRecording varies bcrafton's run (see
// TestBcraftonGradientsFromBeforeRecording): parameters, gradients and
// AdamW's state made in earlier, unrecorded steps; the recorded step
// accumulates into .grad (no zero_grad) and replaces the state. With k = 2
// state tensors per parameter, each size's state blocks stand for half as
// many parameters; as many untraced blocks again are gradients.
func TestAdamWGradientsFromBeforeRecording(t *testing.T) {
	for _, tc := range []struct {
		layers int
		sizes  []int64
	}{
		{2, []int64{4 * mib, 1 * mib, 4096}},
		{12, []int64{9 * mib, 9 * mib, 3 * mib, 2048, 2048}},
	} {
		t.Run(fmt.Sprintf("%d layers", tc.layers), func(t *testing.T) {
			r := newRig()
			s := r.s
			var params, grads, state []int64
			var paramAddrs, gradAddrs []uint64
			for l := 0; l < tc.layers; l++ {
				for _, sz := range tc.sizes {
					paramAddrs = append(paramAddrs, s.Alloc(0, sz, nil))
					params = append(params, sz)
				}
			}
			var old []uint64
			for _, sz := range params {
				gradAddrs = append(gradAddrs, s.Alloc(0, sz, nil))
				grads = append(grads, sz)
				old = append(old, s.Alloc(0, sz, r.optInit), s.Alloc(0, sz, r.optInit))
				state = append(state, sz, sz)
			}
			drop := analysistest.TraceLen(s)
			a := s.Alloc(0, 8*mib, r.fwd)
			loss := s.Alloc(0, 4, r.loss)
			seed := s.Alloc(0, 4, r.seed)
			s.Free(0, seed)
			for _, sz := range params { // AccumulateGrad: a new gradient added into .grad in place
				g := s.Alloc(0, sz, nil)
				s.Free(0, g)
			}
			s.Free(0, a)
			s.Annotate(0, "Optimizer.step#AdamW.step", func() {
				for i, sz := range params {
					s.Alloc(0, sz, r.opt)
					s.Alloc(0, sz, r.opt)
					s.Free(0, old[2*i])
					s.Free(0, old[2*i+1])
				}
			})
			s.Free(0, loss)
			snap := analysistest.Read(t, s, drop)
			h := history.Build(snap, snap.Devices[0])
			pb, preq, pn := liveBy(h, result.Parameter)
			gb, greq, gn := liveBy(h, result.Gradient)
			_, oreq, on := liveBy(h, result.OptimizerState)
			if pn != len(params) || gn != len(grads) || on != len(state) {
				t.Errorf("blocks %d/%d/%d, want %d parameters, %d gradients, %d states", pn, gn, on, len(params), len(grads), len(state))
			}
			if preq != sum(params) || greq != sum(grads) || oreq != sum(state) {
				t.Errorf("requested %d/%d/%d, want %d/%d/%d", preq, greq, oreq, sum(params), sum(grads), sum(state))
			}
			if pb+gb != analysistest.SimBlocks(t, h.Device, slices.Concat(paramAddrs, gradAddrs)) {
				t.Errorf("parameter and gradient blocks %d, the simulator's %d", pb+gb, analysistest.SimBlocks(t, h.Device, slices.Concat(paramAddrs, gradAddrs)))
			}
		})
	}
}
