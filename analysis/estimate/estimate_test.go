package estimate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadConfig reads a config.json of testdata/estimate/configs.
func loadConfig(t *testing.T, name string) *Arch {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "estimate", "configs", name))
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseHFConfig(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return a
}

func mustCompute(t *testing.T, in Inputs) *Result {
	t.Helper()
	r, err := Compute(in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestParameterCounts: the parameter counts of published architectures,
// from their config.json, exact to the parameter. The first four are the
// published counts; the others are computed independently, tensor by
// tensor, by testdata/facts/param_counts.py.
func TestParameterCounts(t *testing.T) {
	for _, tc := range []struct {
		config string
		want   int64
	}{
		{"llama-2-7b.json", 6_738_415_616},
		{"gpt2.json", 124_439_808},
		{"mistral-7b-v0.1.json", 7_241_732_096},
		{"llama-3-8b.json", 8_030_261_248},
		{"qwen2-0.5b.json", 494_032_768},
		{"cs336-small.json", 128_625_408},
		{"cs336-small-v50257.json", 190_460_160},
		{"cs336-medium.json", 423_183_360},
		{"cs336-large.json", 969_411_840},
		{"cs336-2.7b.json", 3_406_809_600},
	} {
		t.Run(tc.config, func(t *testing.T) {
			a := loadConfig(t, tc.config)
			if got := a.ParamCount(); got != tc.want {
				t.Errorf("ParamCount = %d, want %d (off by %d)", got, tc.want, got-tc.want)
			}
			r := mustCompute(t, Inputs{Model: Model{Arch: a}})
			if r.ParameterCount != tc.want || r.ParametersBytes != 4*tc.want {
				t.Errorf("estimate: %d parameters, %d bytes; want %d, %d", r.ParameterCount, r.ParametersBytes, tc.want, 4*tc.want)
			}
		})
	}
}

// TestGuideNumbers reproduces the guide's figures for a 7B model (GB =
// 10⁹ bytes) and its attention-score example.
func TestGuideNumbers(t *testing.T) {
	const n = 7_000_000_000
	const GB = 1_000_000_000
	for _, tc := range []struct {
		name  string
		setup Setup
		field func(*Result) int64
		want  int64
	}{
		{"parameters fp32", Setup{Precision: "fp32"}, func(r *Result) int64 { return r.ParametersBytes }, 28 * GB},
		{"parameters bf16", Setup{Precision: "bf16"}, func(r *Result) int64 { return r.ParametersBytes }, 14 * GB},
		{"parameters fp16", Setup{Precision: "fp16"}, func(r *Result) int64 { return r.ParametersBytes }, 14 * GB},
		{"parameters int8", Setup{Precision: "int8", Optimizer: "none"}, func(r *Result) int64 { return r.ParametersBytes }, 7 * GB},
		{"parameters int4", Setup{Precision: "int4", Optimizer: "none"}, func(r *Result) int64 { return r.ParametersBytes }, 3_500_000_000},
		{"AdamW fp32 states", Setup{Precision: "fp32"}, func(r *Result) int64 { return r.OptimizerStateBytes }, 56 * GB},
		{"AdamW states, mixed", Setup{Precision: "bf16", Mixed: true}, func(r *Result) int64 { return r.OptimizerStateBytes }, 56 * GB},
		{"master weights, mixed", Setup{Precision: "bf16", Mixed: true}, func(r *Result) int64 { return r.MasterWeightsBytes }, 28 * GB},
		{"gradients fp32", Setup{Precision: "fp32"}, func(r *Result) int64 { return r.GradientsBytes }, 28 * GB},
		{"gradients 16-bit", Setup{Precision: "bf16", Mixed: true}, func(r *Result) int64 { return r.GradientsBytes }, 14 * GB},
		{"8-bit AdamW", Setup{Optimizer: "adamw8bit"}, func(r *Result) int64 { return r.OptimizerStateBytes }, 14 * GB},
		{"Adafactor without shapes", Setup{Optimizer: "adafactor"}, func(r *Result) int64 { return r.OptimizerStateBytes }, 28 * GB},
		{"SGD with momentum", Setup{Optimizer: "sgd-momentum"}, func(r *Result) int64 { return r.OptimizerStateBytes }, 28 * GB},
		{"SGD", Setup{Optimizer: "sgd"}, func(r *Result) int64 { return r.OptimizerStateBytes }, 0},
		{"inference: no gradients", Setup{Optimizer: "none"}, func(r *Result) int64 { return r.GradientsBytes }, 0},
		// The guide's sum of the model states; the peak adds what PyTorch's
		// foreach AdamW allocates in its step (one more fp32 copy of the
		// weights, measured) and cuBLAS's two workspaces.
		{"fp32 training states", Setup{Precision: "fp32"}, func(r *Result) int64 {
			return r.ParametersBytes + r.GradientsBytes + r.OptimizerStateBytes
		}, 112 * GB},
		{"fp32 training peak", Setup{Precision: "fp32"}, func(r *Result) int64 { return r.TotalBytes }, 112*GB + 28*GB + 2*32<<20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustCompute(t, Inputs{Model: Model{Params: n}, Setup: tc.setup})
			if got := tc.field(r); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
	// batch × 32 heads × 2048² × 2 bytes = batch × 256 MiB per layer.
	a := loadConfig(t, "llama-2-7b.json")
	for _, b := range []int64{1, 2, 4, 8} {
		r := mustCompute(t, Inputs{Model: Model{Arch: a}, Setup: Setup{Precision: "bf16", Mixed: true, Batch: b, Seq: 2048}})
		if got, want := *r.AttentionScoresLayerBytes, b*256<<20; got != want {
			t.Errorf("batch %d: attention scores %d, want %d", b, got, want)
		}
		// The floor is the guide's rule: a hidden state per layer and one
		// layer's scores; the estimate never falls below it.
		floor := 32*2048*b*4096*2 + b*256<<20
		if *r.ActivationsFloorBytes != floor || *r.ActivationsBytes < floor {
			t.Errorf("batch %d: floor %d (want %d), activations %d", b, *r.ActivationsFloorBytes, floor, *r.ActivationsBytes)
		}
	}
}

// gptArch is Korthikanti et al.'s layer: LayerNorm, multi-head attention
// with dropout, a GELU MLP of 4h, 16-bit.
func gptArch(h, a, L, v int64) *Arch {
	ar := &Arch{Hidden: h, Heads: a, Layers: L, FFN: 4 * h, Vocab: v, Norm: LayerNorm, Dropout: true, Tied: true}
	ar.fill()
	return ar
}

// TestKorthikanti: for the paper's layer the generalised formula is the
// paper's, s·b·h·(34 + 5·a·s/h) bytes per layer in 16-bit, and the model's
// total follows §4–5: 2·s·b·h per layer with full recomputation, 34·s·b·h
// with selective recomputation (one layer's scores recomputed at a time),
// and the output layer's 4·s·b·h·(1 + v/h).
func TestKorthikanti(t *testing.T) {
	for _, d := range []struct{ s, b, h, a, L, v int64 }{
		{2048, 1, 12288, 96, 96, 51200}, // GPT-3 175B, Table 3
		{2048, 4, 4096, 32, 32, 50257},
		{512, 8, 768, 12, 12, 50257},
		{128, 3, 1024, 16, 24, 10000},
	} {
		ar := gptArch(d.h, d.a, d.L, d.v)
		s := Setup{Precision: "bf16", Mixed: true, Batch: d.b, Seq: d.s}
		s.defaults()
		lin, quad := layerActs(ar, s, false)
		if got, want := lin+quad, d.s*d.b*d.h*34+5*d.a*d.s*d.s*d.b; got != want {
			t.Errorf("%+v: layer %d, want s·b·h·(34 + 5·a·s/h) = %d", d, got, want)
		}
		sbh := d.s * d.b * d.h
		out := 4*sbh + 4*d.s*d.b*d.v + sbh // output layer + embedding dropout mask
		layer := sbh*34 + 5*d.a*d.s*d.s*d.b
		for _, tc := range []struct {
			ckpt  string
			flash bool
			want  int64
		}{
			{"none", false, d.L*layer + out},
			{"selective", false, d.L*34*sbh + 5*d.a*d.s*d.s*d.b + out},
			{"full", false, d.L*2*sbh + layer + out},
			{"none", true, d.L*(34*sbh+4*d.a*d.s*d.b) + out},
		} {
			s.Checkpointing, s.Flash = tc.ckpt, tc.flash
			if got := activations(ar, s).total; got != tc.want {
				t.Errorf("%+v %s flash=%v: %d, want %d", d, tc.ckpt, tc.flash, got, tc.want)
			}
		}
	}
}

// TestLoRA: adapters of rank r on every linear layer of Llama-2-7B are
// 39,976,960 parameters at r=16 (PEFT's "trainable params" for
// target_modules="all-linear"); QLoRA keeps the linear layers in 4 bits and
// the embeddings, head and norms in 16.
func TestLoRA(t *testing.T) {
	a := loadConfig(t, "llama-2-7b.json")
	r := mustCompute(t, Inputs{Model: Model{Arch: a}, Setup: Setup{Precision: "int4", LoRARank: 16, Optimizer: "adamw"}})
	if r.TrainableParameterCount != 39_976_960 {
		t.Errorf("trainable = %d, want 39,976,960", r.TrainableParameterCount)
	}
	linear := int64(32 * (4*4096*4096 + 3*4096*11008))
	other := a.ParamCount() - linear
	if want := linear/2 + other*2 + 39_976_960*4; r.ParametersBytes != want {
		t.Errorf("QLoRA parameters %d, want %d", r.ParametersBytes, want)
	}
	if r.GradientsBytes != 4*39_976_960 || r.OptimizerStateBytes != 8*39_976_960 || r.MasterWeightsBytes != 0 {
		t.Errorf("QLoRA gradients %d, optimizer %d, master %d", r.GradientsBytes, r.OptimizerStateBytes, r.MasterWeightsBytes)
	}
}

// TestZeRO reproduces the ZeRO paper's Figure 1 (Rajbhandari et al. 2020):
// a 7.5B model with mixed-precision Adam (2Ψ + 2Ψ + 12Ψ bytes) on 64 GPUs
// needs 120 GB per GPU, 31.4 GB with P_os, 16.6 GB with P_os+g and 1.9 GB
// with P_os+g+p — model states, to which the peak adds cuBLAS's
// workspaces (DeepSpeed's optimizer updates in place).
func TestZeRO(t *testing.T) {
	for _, tc := range []struct {
		stage int
		want  int64
	}{{0, 120_000_000_000}, {1, 31_406_250_000}, {2, 16_640_625_000}, {3, 1_875_000_000}} {
		r := mustCompute(t, Inputs{Model: Model{Params: 7_500_000_000},
			Setup: Setup{Precision: "fp16", Mixed: true, ZeRO: tc.stage, World: 64}})
		if r.TotalBytes-r.WorkspaceBytes != tc.want || r.WorkspaceBytes != 2*32<<20 {
			t.Errorf("stage %d: %d (%d of workspaces), want %d", tc.stage, r.TotalBytes, r.WorkspaceBytes, tc.want)
		}
	}
}

// TestAdafactorShapes: the factored second moment of every matrix is its
// rows plus columns, of every vector its elements.
func TestAdafactorShapes(t *testing.T) {
	a := loadConfig(t, "gpt2.json")
	r := mustCompute(t, Inputs{Model: Model{Arch: a}, Setup: Setup{Optimizer: "adafactor"}})
	h, v, p, f := int64(768), int64(50257), int64(1024), int64(3072)
	perLayer := (2*h + 2*h) + // two LayerNorms (weight, bias)
		(3*h + h) + 3*h + // q, k, v (rows + columns each) and their biases
		(h + h) + h + // output projection and bias
		(f + h) + (h + f) + f + h // MLP matrices and biases
	want := 4 * ((v + h) + (p + h) + 12*perLayer + 2*h)
	if r.OptimizerStateBytes != want {
		t.Errorf("Adafactor state %d, want %d", r.OptimizerStateBytes, want)
	}
}

// TestPlan: a full fine-tune of Llama-2-7B does not fit 24 GiB; the
// cheapest plan that does fits, each of its techniques saves something, and
// no cheaper single technique fits alone.
func TestPlan(t *testing.T) {
	a := loadConfig(t, "llama-2-7b.json")
	gpu, _ := ParseGPU("24GiB")
	r := mustCompute(t, Inputs{Model: Model{Arch: a}, Setup: Setup{Precision: "bf16", Mixed: true, Batch: 4, Seq: 2048}, GPU: gpu})
	if r.Fits == nil || *r.Fits || r.PlanFits == nil || !*r.PlanFits {
		t.Fatalf("fits %v, plan fits %v", r.Fits, r.PlanFits)
	}
	if *r.PlanTotalBytes > gpu.UsableBytes || len(r.Plan) == 0 {
		t.Errorf("plan %+v totals %d over %d usable", r.Plan, *r.PlanTotalBytes, gpu.UsableBytes)
	}
	weight := map[string]int{}
	for _, g := range groups(Inputs{Model: Model{Arch: a}, Setup: r.Setup}) {
		for _, tc := range g {
			weight[tc.id] = tc.weight
		}
	}
	w := 0
	for _, st := range r.Plan {
		w += weight[st.ID]
		if st.SavingBytes <= 0 || st.TotalBytes != *r.PlanTotalBytes {
			t.Errorf("step %+v", st)
		}
	}
	for _, st := range r.Techniques {
		if st.TotalBytes <= gpu.UsableBytes && weight[st.ID] < w {
			t.Errorf("%s alone fits (%d) at a lower cost than the plan %+v", st.ID, st.TotalBytes, r.Plan)
		}
	}
	// It fits as it is: no plan.
	big, _ := ParseGPU("H200-141GB")
	r = mustCompute(t, Inputs{Model: Model{Arch: loadConfig(t, "gpt2.json")}, Setup: Setup{Batch: 8, Seq: 1024}, GPU: big})
	if !*r.Fits || len(r.Plan) != 0 || !*r.PlanFits {
		t.Errorf("GPT-2 on an H200: fits %v, plan %+v", *r.Fits, r.Plan)
	}
	// Nothing makes 70B fit 8 GiB: the plan says so and keeps the smallest.
	small, _ := ParseGPU("8GiB")
	r = mustCompute(t, Inputs{Model: Model{Arch: &Arch{Hidden: 8192, Layers: 80, Heads: 64, KVHeads: 8, FFN: 28672, Vocab: 128256, Gated: true}},
		Setup: Setup{Precision: "bf16", Mixed: true}, GPU: small})
	if *r.PlanFits || *r.PlanTotalBytes >= r.TotalBytes || len(r.Plan) == 0 {
		t.Errorf("70B on 8 GiB: plan fits %v, %d of %d", *r.PlanFits, *r.PlanTotalBytes, r.TotalBytes)
	}
}

// TestUnknownActivations: with a parameter count only, activations are
// null and fits is null unless the rest alone is too large.
func TestUnknownActivations(t *testing.T) {
	gpu, _ := ParseGPU("A100-80GB")
	r := mustCompute(t, Inputs{Model: Model{Params: 1_000_000_000}, GPU: gpu})
	if r.ActivationsBytes != nil || r.Fits != nil || len(r.Notes) == 0 {
		t.Errorf("activations %v, fits %v, notes %v", r.ActivationsBytes, r.Fits, r.Notes)
	}
	r = mustCompute(t, Inputs{Model: Model{Params: 70_000_000_000}, GPU: gpu})
	if r.Fits == nil || *r.Fits {
		t.Errorf("70B fp32 AdamW on 80 GB: fits %v", r.Fits)
	}
	// A count with dimensions: activations from the dimensions.
	r = mustCompute(t, Inputs{Model: Model{Params: 7_000_000_000, Arch: &Arch{Hidden: 4096, Layers: 32, Heads: 32}}})
	if r.ParameterCount != 7_000_000_000 || r.ActivationsBytes == nil || *r.ActivationsBytes <= 0 {
		t.Errorf("count %d, activations %v", r.ParameterCount, r.ActivationsBytes)
	}
}

func TestBadInputs(t *testing.T) {
	a := loadConfig(t, "llama-2-7b.json")
	for _, tc := range []struct {
		in   Inputs
		want string
	}{
		{Inputs{}, "no model"},
		{Inputs{Model: Model{Params: 1}, Setup: Setup{Precision: "fp8"}}, "precision"},
		{Inputs{Model: Model{Params: 1}, Setup: Setup{Optimizer: "lion"}}, "optimizer"},
		{Inputs{Model: Model{Params: 1}, Setup: Setup{Checkpointing: "some"}}, "checkpointing"},
		{Inputs{Model: Model{Params: 1}, Setup: Setup{Batch: -1}}, "batch"},
		{Inputs{Model: Model{Params: 1}, Setup: Setup{ZeRO: 4}}, "ZeRO"},
		{Inputs{Model: Model{Params: 1}, Setup: Setup{Mixed: true}}, "bf16 or fp16"},
		{Inputs{Model: Model{Params: 1}, Setup: Setup{Precision: "int4"}}, "frozen"},
		{Inputs{Model: Model{Params: 1}, Setup: Setup{LoRARank: 8}}, "architecture"},
		{Inputs{Model: Model{Arch: a}, Setup: Setup{LoRARank: 8, Optimizer: "none"}}, "optimizer"},
		{Inputs{Model: Model{Arch: &Arch{Hidden: 10, Layers: 1, Heads: 3, FFN: 1, Vocab: 1}}}, "head"},
		{Inputs{Model: Model{Arch: &Arch{Hidden: 64, Layers: 1, Heads: 4, KVHeads: 3, FFN: 1, Vocab: 1}}}, "divide"},
		{Inputs{Model: Model{Arch: &Arch{Hidden: 64, Layers: 1 << 30, Heads: 4, FFN: 1, Vocab: 1}}}, "beyond"},
		{Inputs{Model: Model{Params: 1, Arch: &Arch{Hidden: 64}}}, "layers"},
		{Inputs{Model: Model{Arch: &Arch{Hidden: 1 << 24, Layers: 1 << 24, Heads: 1, FFN: 1 << 24, Vocab: 1}}}, "beyond any model"},
		{Inputs{Model: Model{Arch: a}, Setup: Setup{Batch: 1 << 20, Seq: 1 << 24}}, "beyond any device"},
	} {
		_, err := Compute(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.in.Setup, err, tc.want)
		}
	}
}

func TestParseHFConfigErrors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{`, "not a JSON"},
		{`[]`, "not a JSON"},
		{`{"model_type":"mixtral","hidden_size":4096,"num_local_experts":8}`, "mixture of experts"},
		{`{"model_type":"llava","text_config":{}}`, "multimodal"},
		{`{"model_type":"llama","hidden_size":4096}`, "layers"},
		{`{"model_type":"llama","hidden_size":4096,"num_hidden_layers":2,"num_attention_heads":32,"intermediate_size":1}`, "vocabulary"},
		{`{"model_type":"llama","hidden_size":-5}`, "hidden"},
		{`{"hidden_size":4096}`, "no model_type"},
		{`{"model_type":"gpt_neox","hidden_size":4096}`, `model_type "gpt_neox": not supported`},
		{`{"model_type":"opt","hidden_size":4096}`, `model_type "opt": not supported`},
		{`{"model_type":"bert","hidden_size":768}`, `model_type "bert": not supported`},
		{`{"model_type":"t5","d_model":512,"is_encoder_decoder":true}`, `"t5" is an encoder-decoder`},
	} {
		_, err := ParseHFConfig([]byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.json, err, tc.want)
		}
	}
	if _, err := ParseHFConfig(make([]byte, maxConfigBytes+1)); err == nil {
		t.Error("an oversized config was read")
	}
	long := `{"model_type":"` + strings.Repeat("x", 5000) + `","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,"intermediate_size":8,"vocab_size":8}`
	if _, err := ParseHFConfig([]byte(long)); err == nil || len(err.Error()) > 300 {
		t.Errorf("a 5000-character model_type: %v (want a refusal that shows at most 40 characters of it)", err)
	}
}

func TestParseUnits(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int64
	}{{"24GiB", 24 << 30}, {"80GB", 80e9}, {"16g", 16 << 30}, {"16384MiB", 16 << 30}, {"512 MB", 512e6}} {
		if got, err := ParseSize(tc.s); err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.s, got, err, tc.want)
		}
	}
	// GPUs: the totals their drivers report (nvidia-smi), usable less the
	// CUDA context and 5% of the rest.
	for _, tc := range []struct {
		s    string
		want int64
	}{{"A100-80GB", 81920 << 20}, {"h100", 81559 << 20}, {"H200", 143771 << 20}, {"rtx4090", 24564 << 20},
		{"24GiB", 24 << 30}, {"T4", 15360 << 20}, {"L4", 23034 << 20}} {
		g, err := ParseGPU(tc.s)
		if err != nil || g.CapacityBytes != tc.want || g.UsableBytes != int64(float64(tc.want-512<<20)*0.95) ||
			!strings.Contains(g.UsableReason, "CUDA context") {
			t.Errorf("ParseGPU(%q) = %+v, %v", tc.s, g, err)
		}
	}
	if _, err := ParseGPU("a potato"); err == nil || !strings.Contains(err.Error(), "A100-80GB") {
		t.Errorf("ParseGPU of nonsense: %v", err)
	}
}
