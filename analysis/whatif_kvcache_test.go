package analysis

import (
	"fmt"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/snapshot/snapshottest"
)

// TestWhatIfKVCacheScales: a KV cache kept by a cache class (transformers'
// and copies of its module) holds batch × tokens of keys and values, so a
// projection scales it with batch·seq — and leaves it alone under the
// activation techniques (checkpointing, autocast); a serving engine's
// preallocated pool (vLLM, SGLang) is sized by its memory fraction and
// stays fixed. Every family of TestKVCacheFamilies, every stack kind.
func TestWhatIfKVCacheScales(t *testing.T) {
	for _, tc := range kvCases {
		pool := strings.Contains(tc.name, "vLLM") || strings.Contains(tc.name, "SGLang")
		for _, kind := range []string{kvModule, kvUser, kvCpp} {
			t.Run(fmt.Sprintf("%s, %s", tc.name, kind), func(t *testing.T) {
				s := st.NewSim()
				s.StateOnly = tc.stateOnly
				cache := tc.run(s, kind, 4)
				snap := read(t, s, 0)
				h := BuildHistory(snap, snap.Devices[0])
				c := buildCurves(h)
				end := len(c.v[0]) - 1
				want := simBlocks(t, h, cache)
				kv := c.v[partKV][end]
				if pool && kv != 0 || !pool && kv != want {
					t.Fatalf("KV part at the end %d B, cache %d B (a pool: %v)", kv, want, pool)
				}
				if kb := 2.0; !pool {
					at1, at2 := c.at(end, unit()), c.at(end, scaled(kb, 1))
					if got := at2 - at1; got < float64(want) {
						t.Errorf("batch ×2 adds %.0f B at the end, less than the cache's %d B", got, want)
					}
					if m := inferModel(h, c); m.KVCacheBytes < want {
						t.Errorf("model's KV cache %d B, below the cache at the end %d B", m.KVCacheBytes, want)
					}
					ck := effects()["activation_checkpointing"].f
					if c.at(end, ck) < float64(want) {
						t.Errorf("checkpointing projects %.0f B, below the KV cache's %d B", c.at(end, ck), want)
					}
				} else if c.at(end, scaled(2, 2)) != c.at(end, unit()) && c.v[partLinear][end]+c.v[partQuad][end] == 0 {
					t.Errorf("a serving pool moved with the batch: %.0f → %.0f", c.at(end, unit()), c.at(end, scaled(2, 2)))
				}
			})
		}
	}
}
