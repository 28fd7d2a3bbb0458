package analysis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// autocastBlocks counts the blocks the autocast rule decided and their
// bytes live after event i (−2: every such block, live or not).
func autocastBlocks(h *history.History, i int) (n int, bytes int64) {
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.Rule() == history.RuleAutocastWeightCache && (i == -2 || b.LiveAt(i)) {
			n++
			bytes += b.Size
			if b.Category != result.AutocastCache {
				panic("autocast copy not in autocast_cache")
			}
		}
	}
	return n, bytes
}

// TestAutocastWeightCache: under bf16 autocast each linear layer's fp32
// weight is copied to bf16 at its first use and cached until the region
// exits — the 12-layer benchmark's "growing list". The copies are
// autocast_cache by their own rule, whatever the layer count and the stacks
// (module frames, user frames only, user and C++ frames, C++ frames only:
// autocast's cached_cast, not a copy to the device); the report says how much the cache holds and what removes
// it. Without frames nothing tells a copy apart (no rule). In fp32 no
// block gets the rule. In an evaluation loop under no_grad the cache is
// made and dropped in every iteration (freed in one burst at the region's
// exit); under grad mode the leaked graphs keep theirs.
func TestAutocastWeightCache(t *testing.T) {
	for _, layers := range []int{1, 2, 12, 48} {
		for _, stacks := range []snapshottest.StackKind{snapshottest.StacksModule, snapshottest.StacksUser, snapshottest.StacksUserCpp, snapshottest.StacksCpp, snapshottest.StacksNone} {
			c := snapshottest.DefaultLeakConfig
			c.Layers, c.Stacks, c.Autocast, c.Steps = layers, stacks, true, 6
			copies := 4*layers + 1 // four linear weights a layer and the LM head
			t.Run(fmt.Sprintf("%d layers, %s", layers, stacks), func(t *testing.T) {
				for _, grad := range []bool{true, false} {
					s := analysistest.Read(t, snapshottest.ForwardPass(c, grad), 0)
					r := Analyze(s, DefaultOptions())
					h := history.Build(s, s.Device(0))
					n, bytes := autocastBlocks(h, h.EndIndex())
					if stacks == snapshottest.StacksNone {
						if n != 0 {
							t.Errorf("grad %v: %d blocks taken for autocast copies without frames", grad, n)
						}
						continue
					}
					if n != copies || bytes != c.CacheBytes() {
						t.Errorf("grad %v: %d copies of %d bytes at the end, want %d of %d", grad, n, bytes, copies, c.CacheBytes())
					}
					found := false
					for _, d := range r.Diagnostics {
						if d.Kind == "autocast_weight_cache" {
							found = true
							for _, w := range []string{units.FormatBytes(c.CacheBytes()), "cache_enabled=False", "bf16"} {
								if !strings.Contains(d.Message, w) {
									t.Errorf("grad %v: the note lacks %q: %s", grad, w, d.Message)
								}
							}
						}
					}
					if !found {
						t.Errorf("grad %v: no autocast_weight_cache note", grad)
					}
					if got := r.Devices[0].Peak.Categories[result.InputData]; got > c.Tokens*8 {
						t.Errorf("grad %v: %d input bytes at the peak: the copies are not inputs", grad, got)
					}
				}
				// the loop under no_grad: a cache per iteration, freed at the
				// region's exit
				s := analysistest.Read(t, snapshottest.EvalLoop(c, false), 0)
				h := history.Build(s, s.Device(0))
				if n, _ := autocastBlocks(h, -2); stacks != snapshottest.StacksNone && n != c.Steps*copies {
					t.Errorf("evaluation loop: %d copies, want %d", n, c.Steps*copies)
				}
				// fp32: nothing is a copy
				fp := c
				fp.Autocast = false
				for _, sim := range []*snapshottest.Sim{snapshottest.ForwardPass(fp, true), snapshottest.EvalLoop(fp, true), snapshottest.EvalLoop(fp, false), snapshottest.TrainLoopHealthy(fp)} {
					s := analysistest.Read(t, sim, 0)
					if n, _ := autocastBlocks(history.Build(s, s.Device(0)), -2); n != 0 {
						t.Errorf("fp32: %d blocks taken for autocast copies", n)
					}
				}
			})
		}
	}
}

// TestAutocastSizeCoincidence: an op whose second allocation has half the
// size of a parameter (layer norm's statistics after its output, at the
// same stack) and lives to the end is no weight copy.
func TestAutocastSizeCoincidence(t *testing.T) {
	sim := snapshottest.NewSim()
	build := sim.Stack(sim.F("torch/nn/modules/linear.py", 106, "__init__"), sim.F("model.py", 31, "__init__"), sim.F("bench.py", 20, "<module>"))
	sim.NoTrace = true
	for i := 0; i < 4; i++ {
		sim.Alloc(0, 8192, build) // parameters of 2,048 fp32 elements
	}
	sim.NoTrace = false
	call := sim.F("torch/nn/modules/module.py", 1787, "_call_impl")
	for l := 0; l < 4; l++ {
		st := sim.Stack(sim.F("torch/nn/functional.py", 2910, "layer_norm"), sim.F("model.py", 60+l, "forward"), call, sim.F("bench.py", 100, "main"))
		sim.Alloc(0, 1<<20, st) // the output
		sim.Alloc(0, 4096, st)  // mean: half a parameter's size
		sim.Alloc(0, 4096, st)  // rstd
	}
	s := analysistest.Read(t, sim, 0)
	h := history.Build(s, s.Device(0))
	if n, _ := autocastBlocks(h, -2); n != 0 {
		t.Errorf("%d blocks of layer norms taken for autocast copies", n)
	}
}
