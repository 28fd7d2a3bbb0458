package analysis

import (
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// TestKVCacheFamilies: every family's cache, in every layer count and stack
// kind, is kv_cache — all of it and nothing else — by the rule and with
// the confidence its evidence allows: High in the libraries' own files,
// Medium in a copy of transformers' module (the name says it, the path
// says the project may have changed it).
func TestKVCacheFamilies(t *testing.T) {
	for _, tc := range analysistest.KVCases {
		for _, kind := range []string{analysistest.KVModule, analysistest.KVUser, analysistest.KVCpp} {
			for _, layers := range []int{2, 32} {
				t.Run(fmt.Sprintf("%s, %s, %d layers", tc.Name, kind, layers), func(t *testing.T) {
					s := st.NewSim()
					s.StateOnly = tc.StateOnly
					cache := tc.Run(s, kind, layers)
					snap := analysistest.Read(t, s, 0)
					h := history.Build(snap, snap.Devices[0])
					bytes, _, n := liveBy(h, result.KVCache)
					if want := analysistest.SimBlocks(t, h.Device, cache); n != len(cache) || bytes != want {
						t.Errorf("kv_cache %d blocks, %d B; want %d, %d", n, bytes, len(cache), want)
					}
					rule, conf := history.RuleKVCache, result.High
					if tc.Copy { // the name says it, the path says the project may have changed it
						rule, conf = history.RuleKVCacheCopy, result.Medium
					}
					for _, b := range h.LiveBlocks(h.EndIndex()) {
						if b.Category == result.KVCache && (b.Rule() != rule || b.Confidence() != conf) {
							t.Errorf("kv_cache block by %s (%s), want %s (%s)", b.Rule(), b.Confidence(), rule, conf)
						}
					}
				})
			}
		}
	}
}

// TestAttentionActivationsNotKVCache: a training run's attention — key and
// value projections, a torch.cat of keys in the user's own attention (extra
// memory tokens), no cache class anywhere — keeps activations: what forward
// saves and backward frees is activation, and nothing is kv_cache.
func TestAttentionActivationsNotKVCache(t *testing.T) {
	for _, kind := range []string{analysistest.KVModule, analysistest.KVUser, analysistest.KVCpp} {
		for _, layers := range []int{2, 12} {
			t.Run(fmt.Sprintf("%s, %d layers", kind, layers), func(t *testing.T) {
				r := newRig()
				s := r.s
				loop := []*st.Dict{s.F("train.py", 40, "<module>")}
				fwd := []*st.Dict{s.F("model.py", 61, "forward"), s.F("model.py", 120, "forward")}
				proj := analysistest.KVStack(s, kind, []*st.Dict{s.F("torch/nn/modules/linear.py", 125, "forward")}, fwd, loop)
				cat := analysistest.KVStack(s, kind, []*st.Dict{s.F("model.py", 64, "key_value")}, fwd, loop)
				var state, grads []uint64
				var acts int64
				for range 3 {
					if grads != nil {
						s.Annotate(0, "Optimizer.zero_grad#AdamW.zero_grad", func() {
							for _, g := range grads {
								s.Free(0, g)
							}
						})
						grads = nil
					}
					var saved []uint64
					for range layers {
						for _, st := range []*st.List{proj, proj, cat, cat} {
							saved = append(saved, s.Alloc(0, 2*mib, st))
							acts += 2 * mib
						}
					}
					loss := s.Alloc(0, 4, r.loss)
					s.Free(0, s.Alloc(0, 4, r.seed))
					for _, p := range paramSizes {
						grads = append(grads, s.Alloc(0, p, nil))
					}
					for _, a := range saved {
						s.Free(0, a)
					}
					s.Annotate(0, "Optimizer.step#AdamW.step", func() {
						if state == nil {
							for _, p := range paramSizes {
								state = append(state, s.Alloc(0, p, r.optInit), s.Alloc(0, p, r.optInit))
							}
						}
					})
					s.Free(0, loss)
				}
				snap := analysistest.Read(t, s, 0)
				h := history.Build(snap, snap.Devices[0])
				var act int64
				for i := range h.Blocks {
					b := &h.Blocks[i]
					if b.Category == result.KVCache {
						t.Errorf("block %#x (%d B) is kv_cache by %s", b.Addr, b.Size, b.Rule())
					}
					if b.Category == result.Activation && b.Requested == 2*mib && b.Rule() == history.RuleSavedForBackward {
						act += b.Requested
					}
				}
				if act != acts {
					t.Errorf("attention activations saved for backward: %d B, want %d", act, acts)
				}
			})
		}
	}
}
