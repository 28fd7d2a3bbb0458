package estimate

import "fmt"

// Norm is the kind of normalisation layer of a block.
type Norm int

// Normalisation layers: RMSNorm has a weight, LayerNorm a weight and a bias.
const (
	RMSNorm Norm = iota
	LayerNorm
)

// Arch is a decoder-only transformer in the Llama/GPT family: token
// embeddings (and learned positions, GPT-2), Layers blocks of
// norm → attention (Heads query heads, KVHeads key/value heads of HeadDim)
// → norm → MLP (gated SwiGLU or plain), a final norm and an output head
// (tied to the embeddings or not).
type Arch struct {
	Name      string `json:"name,omitempty"`
	Hidden    int64  `json:"hidden_size"`
	Layers    int64  `json:"layers"`
	Heads     int64  `json:"heads"`
	KVHeads   int64  `json:"kv_heads"`
	HeadDim   int64  `json:"head_dim"`
	FFN       int64  `json:"ffn_size"`
	Vocab     int64  `json:"vocab_size"`
	Positions int64  `json:"learned_positions,omitempty"` // learned position embeddings (GPT-2); 0 with RoPE
	Tied      bool   `json:"tied_embeddings"`
	Gated     bool   `json:"gated_mlp"` // SwiGLU: gate, up and down projections
	Norm      Norm   `json:"-"`
	NormName  string `json:"norm"`
	QKVBias   bool   `json:"qkv_bias,omitempty"`  // biases on q, k, v (Qwen2, GPT-2)
	OutBias   bool   `json:"out_bias,omitempty"`  // bias on the attention output projection (GPT-2)
	MLPBias   bool   `json:"mlp_bias,omitempty"`  // biases on the MLP projections (GPT-2)
	QKNorm    bool   `json:"qk_norm,omitempty"`   // RMSNorm of each query and key head (Qwen3)
	FusedQKV  bool   `json:"fused_qkv,omitempty"` // one q/k/v projection matrix (GPT-2's c_attn)
	// BlockNorms is the number of norms per block: 2 (before attention and
	// before the MLP), 4 with Gemma 2's norms after each sublayer.
	BlockNorms int64 `json:"block_norms"`
	Dropout    bool  `json:"dropout,omitempty"` // dropout in training (keeps 1-byte masks)
	// Family is the implementation whose tensors the step model counts:
	// FamilyLlama (transformers' Llama, Mistral, Qwen2 code and their
	// kin) or FamilyGPT2 (transformers' GPT-2).
	Family string `json:"family"`
	// Activation is the MLP's activation function as the config names it
	// (hidden_act, activation_function); "" for the family's default.
	Activation string `json:"activation,omitempty"`
	Source     string `json:"source,omitempty"` // where the facts came from (a config file, flags)
}

// Families of implementations the step model knows.
const (
	FamilyLlama = "llama"
	FamilyGPT2  = "gpt2"
)

// Tensor is one kind of parameter tensor of an Arch, repeated Count times
// (once per layer for the blocks' tensors).
type Tensor struct {
	Name       string
	Rows, Cols int64 // Cols = 1 for a vector
	Count      int64
	PerLayer   bool // one copy per block (Count = layers)
	// Linear marks the weight of a block's linear layer: what int8/int4
	// quantization (bitsandbytes) converts and what LoRA adapts.
	Linear bool
}

// Elements is the number of parameters of all Count copies.
func (t Tensor) Elements() int64 { return t.Rows * t.Cols * t.Count }

// Validate reports the first missing or inconsistent fact of a.
func (a *Arch) Validate() error {
	switch {
	case a.Hidden <= 0:
		return fmt.Errorf("hidden size missing")
	case a.Layers <= 0:
		return fmt.Errorf("number of layers missing")
	case a.Heads <= 0:
		return fmt.Errorf("number of attention heads missing")
	case a.KVHeads <= 0 || a.KVHeads > a.Heads || a.Heads%a.KVHeads != 0:
		return fmt.Errorf("key/value heads %d must divide the %d attention heads", a.KVHeads, a.Heads)
	case a.HeadDim <= 0:
		return fmt.Errorf("hidden size %d is not a multiple of the %d heads: give the head dimension", a.Hidden, a.Heads)
	case a.FFN <= 0:
		return fmt.Errorf("MLP (intermediate) size missing")
	case a.Vocab <= 0:
		return fmt.Errorf("vocabulary size missing")
	}
	for _, v := range []int64{a.Hidden, a.Layers, a.Heads, a.KVHeads, a.HeadDim, a.FFN, a.Vocab, a.Positions} {
		if v > 1<<24 {
			return fmt.Errorf("a dimension of %d is beyond any model", v)
		}
	}
	if n := a.approxParams(); n > maxParams {
		return fmt.Errorf("%.3g parameters is beyond any model", n)
	}
	return nil
}

// maxParams bounds a parameter count (a quadrillion): beyond it the
// arithmetic in int64 bytes could overflow.
const maxParams = 1e15

// approxParams is the parameter count in float64 (no overflow).
func (a *Arch) approxParams() float64 {
	h, q, kv := float64(a.Hidden), float64(a.Heads*a.HeadDim), float64(a.KVHeads*a.HeadDim)
	block := h*(2*q+2*kv) + 3*h*float64(a.FFN) + 8*h + 4*q
	return float64(a.Layers)*block + 2*float64(a.Vocab)*h + float64(a.Positions)*h
}

// fill sets the defaults a partial description implies: one key/value head
// per query head, head dimension hidden/heads, norm name.
func (a *Arch) fill() {
	if a.KVHeads == 0 {
		a.KVHeads = a.Heads
	}
	if a.HeadDim == 0 && a.Heads > 0 && a.Hidden%a.Heads == 0 {
		a.HeadDim = a.Hidden / a.Heads
	}
	if a.BlockNorms == 0 {
		a.BlockNorms = 2
	}
	if a.Family == "" {
		a.Family = FamilyLlama
		if a.Norm == LayerNorm && !a.Gated {
			a.Family = FamilyGPT2
		}
	}
	if a.Norm == LayerNorm {
		a.NormName = "layernorm"
	} else {
		a.NormName = "rmsnorm"
	}
}

// Tensors lists the parameter tensors of a, in model order.
func (a *Arch) Tensors() []Tensor {
	h, L := a.Hidden, a.Layers
	q, kv := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	// norm lists a norm's tensors: per block (perLayer) or once.
	norm := func(name string, perLayer bool) []Tensor {
		count := int64(1)
		if perLayer {
			count = L
		}
		ts := []Tensor{{Name: name + ".weight", Rows: h, Cols: 1, Count: count, PerLayer: perLayer}}
		if a.Norm == LayerNorm {
			ts = append(ts, Tensor{Name: name + ".bias", Rows: h, Cols: 1, Count: count, PerLayer: perLayer})
		}
		return ts
	}
	ts := []Tensor{{Name: "embed_tokens", Rows: a.Vocab, Cols: h, Count: 1}}
	if a.Positions > 0 {
		ts = append(ts, Tensor{Name: "embed_positions", Rows: a.Positions, Cols: h, Count: 1})
	}
	ts = append(ts, norm("input_norm", true)...)
	if a.QKNorm {
		ts = append(ts, Tensor{Name: "q_norm", Rows: a.HeadDim, Cols: 1, Count: L, PerLayer: true},
			Tensor{Name: "k_norm", Rows: a.HeadDim, Cols: 1, Count: L, PerLayer: true})
	}
	if a.FusedQKV {
		ts = append(ts, Tensor{Name: "qkv_proj", Rows: q + 2*kv, Cols: h, Count: L, PerLayer: true, Linear: true})
	} else {
		ts = append(ts,
			Tensor{Name: "q_proj", Rows: q, Cols: h, Count: L, PerLayer: true, Linear: true},
			Tensor{Name: "k_proj", Rows: kv, Cols: h, Count: L, PerLayer: true, Linear: true},
			Tensor{Name: "v_proj", Rows: kv, Cols: h, Count: L, PerLayer: true, Linear: true})
	}
	ts = append(ts, Tensor{Name: "o_proj", Rows: h, Cols: q, Count: L, PerLayer: true, Linear: true})
	if a.QKVBias {
		ts = append(ts, Tensor{Name: "qkv_bias", Rows: q + 2*kv, Cols: 1, Count: L, PerLayer: true})
	}
	if a.OutBias {
		ts = append(ts, Tensor{Name: "o_bias", Rows: h, Cols: 1, Count: L, PerLayer: true})
	}
	ts = append(ts, norm("post_attention_norm", true)...)
	for i := int64(2); i < a.BlockNorms; i++ {
		ts = append(ts, norm(fmt.Sprintf("extra_norm%d", i-1), true)...)
	}
	if a.Gated {
		ts = append(ts, Tensor{Name: "gate_proj", Rows: a.FFN, Cols: h, Count: L, PerLayer: true, Linear: true})
	}
	ts = append(ts,
		Tensor{Name: "up_proj", Rows: a.FFN, Cols: h, Count: L, PerLayer: true, Linear: true},
		Tensor{Name: "down_proj", Rows: h, Cols: a.FFN, Count: L, PerLayer: true, Linear: true})
	if a.MLPBias {
		if a.Gated {
			ts = append(ts, Tensor{Name: "gate_bias", Rows: a.FFN, Cols: 1, Count: L, PerLayer: true})
		}
		ts = append(ts, Tensor{Name: "up_bias", Rows: a.FFN, Cols: 1, Count: L, PerLayer: true},
			Tensor{Name: "down_bias", Rows: h, Cols: 1, Count: L, PerLayer: true})
	}
	ts = append(ts, norm("final_norm", false)...)
	if !a.Tied {
		ts = append(ts, Tensor{Name: "lm_head", Rows: a.Vocab, Cols: h, Count: 1})
	}
	return ts
}

// ParamCount is the number of parameters of a (a tied head counted once).
func (a *Arch) ParamCount() int64 {
	var n int64
	for _, t := range a.Tensors() {
		n += t.Elements()
	}
	return n
}

// layerParams is the number of parameters of one block.
func (a *Arch) layerParams() int64 {
	var n int64
	for _, t := range a.Tensors() {
		if t.PerLayer {
			n += t.Rows * t.Cols
		}
	}
	return n
}
