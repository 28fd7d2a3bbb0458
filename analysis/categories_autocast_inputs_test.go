package analysis

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// TestAutocastInputCastsOfWeightSize: under autocast an op casts every
// fp32 argument, not only weights — a projection's fp32 input (a norm's
// output) before its weight, and a hand-written attention's queries and
// keys (fp32 after a rotary embedding). With batch × sequence equal to the
// hidden size those input casts have exactly the size of a weight's copy,
// as in the cs336 model at 4 × 256 tokens. The copies are still exactly
// the weights' (four a layer), with module frames (nn.Linear) or user
// frames through einsum, and none of the input casts.
func TestAutocastInputCastsOfWeightSize(t *testing.T) {
	const hidden = 256
	for _, tc := range []struct {
		name          string
		tokens        int64
		einsum        bool // cs336-style: a hand-written Linear calling einsum
		handAttention bool // a hand-written attention that casts q and k
	}{
		{"nn.Linear, tokens = hidden", hidden, false, false},
		{"einsum, tokens = hidden", hidden, true, true},
		{"einsum, tokens = 2 × hidden", 2 * hidden, true, true},
		{"nn.Linear and hand-written attention, tokens = hidden", hidden, false, true},
	} {
		for _, layers := range []int{2, 8} {
			t.Run(fmt.Sprintf("%s, %d layers", tc.name, layers), func(t *testing.T) {
				s := analysistest.Read(t, autocastInputCasts(layers, hidden, tc.tokens, tc.einsum, tc.handAttention), 0)
				h := history.Build(s, s.Device(0))
				n, bytes := autocastBlocks(h, h.EndIndex())
				if want := 4 * layers; n != want || bytes != int64(want)*hidden*hidden*2 {
					t.Errorf("%d copies (%d B) at the end, want the %d weights' (%d B)", n, bytes, want, int64(want)*hidden*hidden*2)
				}
			})
		}
	}
}

// autocastInputCasts simulates the forward of an AMP model whose weights
// predate the recording: per layer an fp32 norm output, then q, k and v
// projections that each cast that input and then their weight (autocast's
// cached_cast in C++ frames), an attention that may cast q and k itself,
// and an output projection of a 16-bit input that casts only its weight.
// Nothing is freed: the snapshot is taken at the end of forward.
func autocastInputCasts(layers int, hidden, tokens int64, einsum, handAttention bool) *snapshottest.Sim {
	sim := snapshottest.NewSim()
	sim.NoTrace = true
	init := sim.Stack(sim.F("torch/nn/modules/linear.py", 106, "__init__"), sim.F("model.py", 31, "__init__"), sim.F("train.py", 20, "<module>"))
	for i := 0; i < 4*layers; i++ {
		sim.Alloc(0, hidden*hidden*4, init)
	}
	sim.NoTrace = false
	cpp := func(cast bool) []*snapshottest.Dict {
		fr := []*snapshottest.Dict{
			sim.F("CUDACachingAllocator.cpp", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, unsigned long, CUstream_st*)"),
			sim.F("", 0, "at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)"),
		}
		if cast {
			fr = append(fr, sim.F("", 0, "at::native::_to_copy(at::Tensor const&, std::optional<c10::ScalarType>)"),
				sim.F("", 0, "at::autocast::cached_cast(c10::ScalarType, at::Tensor const&, c10::DeviceType)"))
		}
		op := "linear"
		if einsum {
			op = "einsum"
		}
		return append(fr, sim.F("", 0, "at::native::"+op+"(at::Tensor const&)"), sim.F("", 0, "at::_ops::"+op+"::call(at::Tensor const&)"))
	}
	call := sim.F("torch/nn/modules/module.py", 1787, "_call_impl")
	outer := []*snapshottest.Dict{call, sim.F("model.py", 250, "forward"), call, sim.F("train.py", 40, "main")}
	stack := func(cast bool, py ...*snapshottest.Dict) *snapshottest.List {
		return sim.Stack(append(append(cpp(cast), py...), outer...)...)
	}
	// a projection called at line of the attention block's forward
	proj := func(line int, cast bool) *snapshottest.List {
		var py []*snapshottest.Dict
		if einsum {
			py = append(py, sim.F("torch/functional.py", 373, "einsum"), sim.F("einops/einops.py", 939, "einsum"), sim.F("model.py", 39, "forward"))
		} else {
			py = append(py, sim.F("torch/nn/modules/linear.py", 125, "forward"))
		}
		return stack(cast, append(py, call, sim.F("model.py", line, "forward"))...)
	}
	attn := func(cast bool) *snapshottest.List {
		var py []*snapshottest.Dict
		if einsum {
			py = append(py, sim.F("torch/functional.py", 373, "einsum"), sim.F("einops/einops.py", 939, "einsum"))
		} else {
			py = append(py, sim.F("torch/functional.py", 373, "einsum"))
		}
		return stack(cast, append(py, sim.F("model.py", 427, "scaled_dot_product_attention"), sim.F("model.py", 520, "forward"))...)
	}
	norm := stack(false, sim.F("model.py", 90, "forward"), call, sim.F("model.py", 370, "forward"))
	act := tokens * hidden * 2 // a 16-bit activation, the size of a weight's copy when tokens = hidden
	for l := 0; l < layers; l++ {
		sim.Alloc(0, tokens*hidden*4, norm) // the fp32 norm output
		for j := 0; j < 3; j++ {            // q, k, v: the input's cast, the weight's, the output
			sim.Alloc(0, act, proj(494+j, true))
			sim.Alloc(0, hidden*hidden*2, proj(494+j, true))
			sim.Alloc(0, act, proj(494+j, false))
		}
		if handAttention {
			sim.Alloc(0, act, attn(true)) // q and k cast to 16 bits by the scores' einsum
			sim.Alloc(0, act, attn(true))
			sim.Alloc(0, tokens*tokens*2, attn(false))
		}
		sim.Alloc(0, act, attn(false))                 // the attention's 16-bit output
		sim.Alloc(0, hidden*hidden*2, proj(524, true)) // o_proj: the weight's cast only
		sim.Alloc(0, act, proj(524, false))
	}
	return sim
}

// TestAutocastCopiesCS336: the cs336 'medium' model's AMP step, recorded at
// 128 and 256 tokens (at 256, batch × sequence is its hidden size: every
// input cast of a projection has the size of a weight's copy), holds at
// its peak, early in backward, a 16-bit copy of every linear weight: 24
// layers × (4 h² + 3 h·f) + the head's v·h elements, 2 bytes each (in
// the allocator's blocks: a block may keep up to 1 MiB the large pool did
// not split off).
func TestAutocastCopiesCS336(t *testing.T) {
	a := loadArch(t, "cs336-medium.json")
	want := 2 * (a.Layers*(4*a.Hidden*a.Hidden+3*a.Hidden*a.FFN) + a.Vocab*a.Hidden)
	for _, seq := range []int64{128, 256} {
		s, err := load.Open(filepath.Join(measuredHere, cs336Rerun(t)["amp"][seq].Snapshot), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		d := Analyze(s, DefaultOptions()).Devices[0]
		if got := d.Peak.Categories[result.AutocastCache]; got < want || got > want+1<<20 {
			t.Errorf("seq %d: autocast_cache at the peak %d, want the weights' copies %d", seq, got, want)
		}
	}
}
