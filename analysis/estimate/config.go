package estimate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// maxConfigBytes bounds a config.json: real ones are a few KiB.
const maxConfigBytes = 4 << 20

// hfConfig holds the keys of a Hugging Face config.json that decide the
// parameter count, under every name the supported families use.
type hfConfig struct {
	ModelType string `json:"model_type"`

	HiddenSize *int64 `json:"hidden_size"`
	NEmbd      *int64 `json:"n_embd"`
	DModel     *int64 `json:"d_model"`

	Layers    *int64 `json:"num_hidden_layers"`
	NLayer    *int64 `json:"n_layer"`
	NumLayers *int64 `json:"num_layers"`

	Heads    *int64 `json:"num_attention_heads"`
	NHead    *int64 `json:"n_head"`
	NumHeads *int64 `json:"num_heads"`

	KVHeads *int64 `json:"num_key_value_heads"`
	HeadDim *int64 `json:"head_dim"`

	Intermediate *int64 `json:"intermediate_size"`
	NInner       *int64 `json:"n_inner"`
	DFF          *int64 `json:"d_ff"`

	Vocab      *int64 `json:"vocab_size"`
	NPositions *int64 `json:"n_positions"`
	Tie        *bool  `json:"tie_word_embeddings"`

	HiddenAct   string `json:"hidden_act"`
	ActFunction string `json:"activation_function"`

	AttentionBias *bool `json:"attention_bias"`
	MLPBias       *bool `json:"mlp_bias"`

	EncoderDecoder *bool `json:"is_encoder_decoder"`

	Experts     *int64   `json:"num_local_experts"`
	NumExperts  *int64   `json:"num_experts"`
	TextConfig  any      `json:"text_config"`
	AttnDropout *float64 `json:"attention_dropout"`
	HidDropout  *float64 `json:"hidden_dropout"`
	ResidPdrop  *float64 `json:"resid_pdrop"`
	EmbdPdrop   *float64 `json:"embd_pdrop"`
	AttnPdrop   *float64 `json:"attn_pdrop"`
}

func firstString(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func first(ps ...*int64) int64 {
	for _, p := range ps {
		if p != nil {
			return *p
		}
	}
	return 0
}

// ModelTypes are the model_type values ParseHFConfig counts exactly: the
// Llama family (RMSNorm, gated MLP, rotary positions, bias-free linears
// unless attention_bias / mlp_bias say otherwise; qwen2's q/k/v biases,
// qwen3's q/k norms, gemma's tied head, gemma2's four norms a block) and
// gpt2 (LayerNorm, GELU MLP, biases, learned positions, tied head).
var ModelTypes = []string{"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gpt2"}

// ParseHFConfig reads a Hugging Face config.json of a decoder-only
// transformer of one of ModelTypes. Every other model_type is refused by
// name: its parameters are laid out differently (GPT-NeoX's and OPT's
// LayerNorm biases and fused or offset embeddings, BERT's encoder, T5's
// encoder-decoder), and counting it with these rules would be wrong.
// Mixture-of-experts and multimodal configs are refused too: their count
// needs more than these keys.
func ParseHFConfig(data []byte) (*Arch, error) {
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("config is %d bytes, more than any config.json (%d)", len(data), maxConfigBytes)
	}
	var c hfConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("not a JSON config: %v", err)
	}
	if first(c.Experts, c.NumExperts) > 1 {
		return nil, fmt.Errorf("model_type %q is a mixture of experts: not supported (give --params)", c.ModelType)
	}
	if c.TextConfig != nil {
		return nil, fmt.Errorf("a multimodal config (text_config): give the text model's config or --params")
	}
	mt := strings.ToLower(c.ModelType)
	if r := []rune(mt); len(r) > 40 {
		mt = string(r[:40]) + "…" // a name to show, not a wall of text
	}
	switch {
	case mt == "":
		return nil, fmt.Errorf("no model_type: the config does not say which architecture it is (counted: %s); give --params and the dimensions instead", strings.Join(ModelTypes, ", "))
	case c.EncoderDecoder != nil && *c.EncoderDecoder:
		return nil, fmt.Errorf("model_type %q is an encoder-decoder: not supported (counted: %s)", mt, strings.Join(ModelTypes, ", "))
	case !oneOf(mt, ModelTypes):
		return nil, fmt.Errorf("model_type %q: not supported (counted exactly: %s); give --params and the dimensions instead", mt, strings.Join(ModelTypes, ", "))
	}
	a := &Arch{Name: mt,
		Hidden: first(c.HiddenSize, c.NEmbd, c.DModel), Layers: first(c.Layers, c.NLayer, c.NumLayers),
		Heads: first(c.Heads, c.NHead, c.NumHeads), KVHeads: first(c.KVHeads), HeadDim: first(c.HeadDim),
		FFN: first(c.Intermediate, c.NInner, c.DFF), Vocab: first(c.Vocab), Gated: true,
		Activation: strings.ToLower(firstString(c.HiddenAct, c.ActFunction))}
	if r := []rune(a.Activation); len(r) > 40 {
		a.Activation = string(r[:40])
	}
	for _, p := range []*float64{c.AttnDropout, c.HidDropout, c.ResidPdrop, c.EmbdPdrop, c.AttnPdrop} {
		if p != nil && *p > 0 {
			a.Dropout = true
		}
	}
	switch mt {
	case "gpt2":
		// GPT-2: Conv1D layers with biases, LayerNorm, GELU MLP of 4×hidden
		// unless n_inner, learned positions, head tied to the embeddings.
		a.Gated, a.Norm, a.QKVBias, a.OutBias, a.MLPBias, a.Tied, a.FusedQKV = false, LayerNorm, true, true, true, true, true
		a.Family = FamilyGPT2
		a.Positions = first(c.NPositions)
		if a.FFN == 0 {
			a.FFN = 4 * a.Hidden
		}
		if c.ResidPdrop == nil && c.AttnPdrop == nil && c.EmbdPdrop == nil {
			a.Dropout = true // GPT2Config defaults: 0.1
		}
	case "qwen2":
		a.QKVBias = true
	case "gemma":
		a.Tied = true
	case "gemma2":
		a.Tied, a.BlockNorms = true, 4
	case "qwen3":
		a.QKNorm = true
	}
	if c.AttentionBias != nil && *c.AttentionBias {
		a.QKVBias, a.OutBias = true, true
	}
	if c.MLPBias != nil && *c.MLPBias {
		a.MLPBias = true
	}
	if c.Tie != nil {
		a.Tied = *c.Tie
	}
	a.fill()
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return a, nil
}
