package analysis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis/whatif"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// TestModelFactsFrozenBase: adapters (peft) trained with AdamW on a frozen
// base keep two states per trained weight and none for the base. The
// model facts read the optimizer's ratio and the gradient and state
// estimates against the weights that train: 2 states per parameter, not
// "no common optimizer's ratio" because the base is counted too. The
// recording begins after the model is built (the weights carry no stack),
// as when a pretrained model is loaded, wrapped and then trained; where
// the stacks show no adapter library, the base is no known parameter and
// the ratio holds as it is.
func TestModelFactsFrozenBase(t *testing.T) {
	for _, kind := range frameKinds {
		for _, c := range []trainRun{
			// Adapters are small beside the base weights they adapt.
			{layers: 2, hidden: 1024, tokens: 64, steps: 2, frozen: 16, frozenSize: 16 << 20, untraced: true},
			{layers: 4, hidden: 512, tokens: 256, steps: 3, frozen: 40, frozenSize: 4 << 20, untraced: true},
			{layers: 8, hidden: 256, tokens: 512, steps: 2, frozen: 8, frozenSize: 12 << 20, untraced: true},
		} {
			t.Run(fmt.Sprintf("%s, %d trained of %d², %d frozen of %d B", kind, c.layers, c.hidden, c.frozen, c.frozenSize), func(t *testing.T) {
				x := fx{st.NewSim(), kind}
				c.run(x)
				s := x.s
				// peft's LoRA layer at work (a forward temporary).
				s.Free(0, s.Alloc(0, 1<<20, x.stack(nil, []*st.Dict{s.F("peft/tuners/lora/layer.py", 727, "forward")}, []*st.Dict{s.F("train.py", 21, "<module>")})))
				r := Analyze(analysistest.Read(t, s, 0), DefaultOptions())
				m := r.WhatIf.Model
				frozen := int64(c.frozen) * c.frozenSize
				if kind == "module frames" && m.FrozenParameterBytes != frozen {
					t.Errorf("frozen base %d B, want %d (peft in the stacks)", m.FrozenParameterBytes, frozen)
				}
				if m.FrozenParameterBytes != 0 && m.FrozenParameterBytes != frozen {
					t.Errorf("frozen base %d B, want %d or none", m.FrozenParameterBytes, frozen)
				}
				if m.StatePerParameterByte != 2 || !strings.Contains(m.Optimizer, "AdamW") {
					t.Errorf("optimizer state = %v × parameters (%s), want 2 (AdamW over the trained weights)", m.StatePerParameterByte, m.Optimizer)
				}
				if m.EstimatedGradientBytes != c.weightBytes || m.EstimatedOptimizerStateBytes != 2*c.weightBytes {
					t.Errorf("estimates: gradients %d, state %d; want %d, %d (the trained weights')", m.EstimatedGradientBytes, m.EstimatedOptimizerStateBytes, c.weightBytes, 2*c.weightBytes)
				}
			})
		}
	}
}

// TestModelFactsFrozenBaseRecorded: the recorded LoRA run (a bf16 base of
// 311,461,888 B, fp32 adapters of 9,306,112 B, AdamW state 18,612,224 B):
// the base is told apart, AdamW's ratio is read against the adapters and
// the estimates are theirs, to the byte.
func TestModelFactsFrozenBaseRecorded(t *testing.T) {
	s := analysistest.OpenShared(t, "recorded", "hf_llama_lora16_bf16_train.pickle.gz")
	m := Analyze(s, DefaultOptions()).WhatIf.Model
	// The base's buffers (rotary frequencies: 2 × 128 B) get no gradient either.
	if m.FrozenParameterBytes < 311_461_888 || m.FrozenParameterBytes > 311_461_888+256 || m.ParameterCount != 9_306_112/4 {
		t.Errorf("frozen base %d B, %d trained parameters; want 311,461,888 B (+ at most 256 B of buffers), 2,326,528", m.FrozenParameterBytes, m.ParameterCount)
	}
	if m.StatePerParameterByte != 2 || m.EstimatedGradientBytes != 9_306_112 || m.EstimatedOptimizerStateBytes != 18_612_224 {
		t.Errorf("ratio %v, estimates %d / %d; want 2, 9,306,112 / 18,612,224", m.StatePerParameterByte, m.EstimatedGradientBytes, m.EstimatedOptimizerStateBytes)
	}
	// A projection of the run counts the adapters as what trains and claims
	// no count for the base.
	e, err := Project(s, DefaultOptions(), whatif.Size{Batch: 4, Seq: 1024}, whatif.Size{Batch: 8, Seq: 1024}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.ParameterCount != 0 || e.TrainableParameterCount != 9_306_112/4 {
		t.Errorf("projection: %d parameters, %d trainable; want 0 (the base's dtype is unknown), 2,326,528", e.ParameterCount, e.TrainableParameterCount)
	}
}

// TestModelFactsCountTensorBytes: the allocator serves an 11 MiB weight
// from a 12 MiB segment it does not split (the rest is under 1 MiB), so a
// model's parameters take more bytes of blocks than of tensors; the count
// divides the tensors' bytes and the model facts name both, whatever the
// stacks — the hf_llama_mixed_ckpt_train recording's 620 MiB of blocks
// hold 622,923,776 B of tensors, 155.7M fp32 parameters.
func TestModelFactsCountTensorBytes(t *testing.T) {
	for _, kind := range frameKinds {
		// 1700² and 1800² fp32 weights: 11.0 and 12.4 MiB, in 12 and 14 MiB
		// blocks; 1024²: 4 MiB exactly.
		for _, c := range []trainRun{
			{layers: 4, hidden: 1700, tokens: 64, steps: 2},
			{layers: 3, hidden: 1800, tokens: 64, steps: 2},
			{layers: 6, hidden: 1024, tokens: 64, steps: 2},
		} {
			t.Run(fmt.Sprintf("%s, %d layers of %d²", kind, c.layers, c.hidden), func(t *testing.T) {
				x := fx{st.NewSim(), kind}
				s := x.s
				c.run(x)
				m := Analyze(analysistest.Read(t, s, 0), DefaultOptions()).WhatIf.Model
				tensors := int64(c.layers) * c.hidden * c.hidden * 4
				want := tensors
				if tensors*100 >= m.ParameterBytes*99 {
					want = 0 // blocks and tensors within 1%: nothing more to say
				}
				if m.ParameterTensorBytes != want || m.ParameterCount != tensors/4 {
					t.Errorf("%d B of blocks, %d of tensors, %d parameters; want %d of tensors, %d parameters", m.ParameterBytes, m.ParameterTensorBytes, m.ParameterCount, want, tensors/4)
				}
			})
		}
	}
	s := analysistest.OpenShared(t, "recorded", "hf_llama_mixed_ckpt_train.pickle.gz")
	m := Analyze(s, DefaultOptions()).WhatIf.Model
	if m.ParameterTensorBytes < 622_923_776 || m.ParameterTensorBytes > 622_923_776+256 || m.ParameterBytes <= m.ParameterTensorBytes || m.ParameterCount != 622_923_776/4 {
		t.Errorf("hf_llama_mixed_ckpt_train: %d B of blocks, %d of tensors, %d parameters; want 622,923,776 B of tensors (+ 256 B of buffers), 155,730,944", m.ParameterBytes, m.ParameterTensorBytes, m.ParameterCount)
	}
}
