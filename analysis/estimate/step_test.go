package estimate

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestKVCacheInference: Llama-2-7B in bf16 generating at batch 32 after a
// 4096-token prompt keeps 2 × 32 layers × 32 × 32 KV heads × 128 × 4096 ×
// 2 B = 64 GiB of KV cache (the one new token is returned, never read
// back), which with 12.6 GiB of weights does not fit an 80 GB GPU; the
// prompt's forward holds the prompt's cache and its working set, the
// generation's last read the whole cache, one layer's concatenation, the
// last position's logits (and their fp32 copy) and its residual stream.
func TestKVCacheInference(t *testing.T) {
	a := loadConfig(t, "llama-2-7b.json")
	for _, name := range []string{"A100-80GB", "H100"} {
		gpu, _ := ParseGPU(name)
		r := mustCompute(t, Inputs{Model: Model{Arch: a}, GPU: gpu,
			Setup: Setup{Precision: "bf16", Optimizer: "none", Batch: 32, Seq: 4096, NewTokens: 1}})
		if r.KVCacheBytes != 64<<30 {
			t.Errorf("KV cache %d, want 64 GiB", r.KVCacheBytes)
		}
		if r.Fits == nil || *r.Fits || r.TotalBytes <= gpu.CapacityBytes {
			t.Errorf("%s: fits %v with a peak of %d", name, r.Fits, r.TotalBytes)
		}
		var gen PhasePeak
		for _, p := range r.Phases {
			if p.Phase == PhaseGenerate {
				gen = p
			}
		}
		layer := int64(2 * 32 * 4096 * 4096 * 2) // one layer's keys and values at 4096 tokens
		if want := r.ParametersBytes + r.WorkspaceBytes + 64<<30 + layer/2 + 32*32000*6 + 32*4096*6; gen.Bytes != want {
			t.Errorf("generation phase %d, want %d: %+v", gen.Bytes, want, gen.Parts)
		}
	}
	// A static cache is the whole generation's from the prompt's forward
	// on, and never grows a layer at a time.
	static := mustCompute(t, Inputs{Model: Model{Arch: a}, Setup: Setup{Precision: "bf16", Optimizer: "none", Batch: 32, Seq: 4000, NewTokens: 97, StaticCache: true}})
	for _, p := range static.Phases {
		for _, part := range p.Parts {
			if part.Name == "KV cache" && part.Bytes != 64<<30 {
				t.Errorf("static cache: %s holds %d B of KV cache, want the whole 64 GiB", p.Phase, part.Bytes)
			}
		}
	}
	// A forward of the same batch without generation keeps no cache.
	r := mustCompute(t, Inputs{Model: Model{Arch: a}, Setup: Setup{Precision: "bf16", Optimizer: "none", Batch: 32, Seq: 4096}})
	if r.KVCacheBytes != 0 || len(r.Phases) != 1 || r.PeakPhase != PhaseForward {
		t.Errorf("forward: KV %d, phases %+v", r.KVCacheBytes, r.Phases)
	}
}

// TestMoreModelTypes: the published parameter counts of a Qwen3, a Gemma
// and a Gemma 2 model, from their config.json keys, exact.
func TestMoreModelTypes(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       int64
	}{
		{"Qwen3-0.6B", `{"model_type":"qwen3","hidden_size":1024,"num_hidden_layers":28,"num_attention_heads":16,"num_key_value_heads":8,"head_dim":128,"intermediate_size":3072,"vocab_size":151936,"tie_word_embeddings":true,"attention_bias":false}`, 596_049_920},
		{"gemma-2b", `{"model_type":"gemma","hidden_size":2048,"num_hidden_layers":18,"num_attention_heads":8,"num_key_value_heads":1,"head_dim":256,"intermediate_size":16384,"vocab_size":256000}`, 2_506_172_416},
		{"gemma-2-2b", `{"model_type":"gemma2","hidden_size":2304,"num_hidden_layers":26,"num_attention_heads":8,"num_key_value_heads":4,"head_dim":256,"intermediate_size":9216,"vocab_size":256000}`, 2_614_341_888},
	} {
		a, err := ParseHFConfig([]byte(tc.json))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := a.ParamCount(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d", tc.name, got, tc.want)
		}
	}
}

// TestFormulaIsComputed: the per-block formula the output prints,
// evaluated with the dimensions it prints, is the bytes the estimate added
// up for a block — for every family, precision and attention kernel.
func TestFormulaIsComputed(t *testing.T) {
	llama, gpt2 := loadConfig(t, "llama-3-8b.json"), loadConfig(t, "gpt2.json")
	term := regexp.MustCompile(`^(\d*)([a-z]*)$`)
	for _, a := range []*Arch{llama, gpt2} {
		for _, s := range []Setup{{Precision: "fp32"}, {Precision: "fp32", AMP: true}, {Precision: "bf16"},
			{Precision: "bf16", LoRARank: 16}, {Precision: "fp32", Attention: "eager"}, {Precision: "bf16", Attention: "eager"}} {
			s.Batch, s.Seq = 2, 512
			in := Inputs{Model: Model{Arch: a}, Setup: s}
			in.Setup.defaults()
			var block, dimsLine string
			for _, f := range Formulas(in) {
				if strings.HasPrefix(f, "per block") {
					block = f
				}
				if strings.HasPrefix(f, "dimensions: ") {
					dimsLine = strings.TrimPrefix(f, "dimensions: ")
				}
			}
			d := map[string]int64{}
			for _, kv := range strings.Fields(dimsLine) {
				k, v, _ := strings.Cut(kv, "=")
				d[k], _ = strconv.ParseInt(v, 10, 64)
			}
			sum := block[strings.Index(block, "b·s·(")+len("b·s·(") : strings.Index(block, ") B")]
			var perToken int64
			for _, p := range strings.Split(sum, " + ") {
				m := term.FindStringSubmatch(p)
				if m == nil {
					t.Fatalf("%q: term %q", block, p)
				}
				c := int64(1)
				if m[1] != "" {
					c, _ = strconv.ParseInt(m[1], 10, 64)
				}
				if m[2] != "" {
					c *= d[m[2]]
				}
				perToken += c
			}
			var perScore int64
			if i := strings.Index(block, ") B + "); i >= 0 {
				fmt.Sscanf(block[i+len(") B + "):], "%d", &perScore)
			}
			wantToken, wantScore := blockKept(a, in.Setup)
			if perToken != wantToken.eval() || perScore != wantScore {
				t.Errorf("%s %+v: printed %q evaluates to %d + %d per score, computed %d + %d", a.Name, s, block, perToken, perScore, wantToken.eval(), wantScore)
			}
		}
	}
}
