package whatif

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// TestWhatIfKVCacheScales: a KV cache kept by a cache class (transformers'
// and copies of its module) holds batch × tokens of keys and values, so a
// projection scales it with batch·seq — and leaves it alone under the
// activation techniques (checkpointing, autocast); a serving engine's
// preallocated pool (vLLM, SGLang) is sized by its memory fraction and
// stays fixed. Every family of TestKVCacheFamilies, every stack kind.
func TestWhatIfKVCacheScales(t *testing.T) {
	for _, tc := range analysistest.KVCases {
		pool := strings.Contains(tc.Name, "vLLM") || strings.Contains(tc.Name, "SGLang")
		for _, kind := range []string{analysistest.KVModule, analysistest.KVUser, analysistest.KVCpp} {
			t.Run(fmt.Sprintf("%s, %s", tc.Name, kind), func(t *testing.T) {
				s := st.NewSim()
				s.StateOnly = tc.StateOnly
				cache := tc.Run(s, kind, 4)
				snap := analysistest.Read(t, s, 0)
				h := history.Build(snap, snap.Devices[0])
				c := buildCurves(h, 0)
				end := c.end()
				last := c.at(end)
				want := analysistest.SimBlocks(t, h.Device, cache)
				kv := last[PartKV]
				if pool && kv != 0 || !pool && kv != want {
					t.Fatalf("KV part at the end %d B, cache %d B (a pool: %v)", kv, want, pool)
				}
				// At the end, batch ×2 adds one more of each part that scales
				// with the batch — the KV cache among them unless it is a pool
				// — and checkpointing keeps 35% of the activations only.
				act := float64(last[PartLinear] + last[PartQuad] + last[PartLinearRest] + last[PartQuadRest])
				if got, want := c.value(end, scaled(2, 1))-c.value(end, unit()), act+float64(kv); math.Abs(got-want) > 1 {
					t.Errorf("batch ×2 adds %.0f B at the end, want %.0f (activations %.0f, KV part %d)", got, want, act, kv)
				}
				ck := effects()["activation_checkpointing"].f
				if got, want := c.value(end, unit())-c.value(end, ck), 0.65*act; math.Abs(got-want) > 1 {
					t.Errorf("checkpointing lowers the end by %.0f B, want %.0f (the activations' 65%% only)", got, want)
				}
				if m := inferModel(h, c); !pool && m.KVCacheBytes < want {
					t.Errorf("model's KV cache %d B, below the cache at the end %d B", m.KVCacheBytes, want)
				}
			})
		}
	}
}
