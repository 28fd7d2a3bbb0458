// Package estimate answers "will it fit?" before a run: the peak memory of
// a training step (or of inference) of a decoder-only transformer from its
// architecture or parameter count. It models what the real stack
// allocates — transformers' blocks and causal-LM loss on float32 logits,
// PyTorch's autocast weight copies, SDPA's kernels, AdamW's foreach
// scratch, cuBLAS workspaces, peft's LoRA, gradient checkpointing, a
// generation's KV cache — phase by phase, and is calibrated on measured
// peaks (the README's table). It also states the textbook figures
// (Korthikanti et al. 2022, the guide's floor), handles ZeRO sharding and
// offload, and searches the cheapest combination of techniques that makes
// a run fit a GPU. Its Result is the JSON schema torchmem.estimate/v1,
// which projections from a measured snapshot (package analysis) fill too.
// It imports nothing of torchmem's.
package estimate

import (
	"errors"
	"fmt"
	"strings"
)

// SchemaID is the JSON schema of Result. Fields may be added in v1; none is
// renamed or removed without a new identifier.
const SchemaID = "torchmem.estimate/v1"

// Precisions of the weights.
var Precisions = []string{"fp32", "bf16", "fp16", "int8", "int4"}

// Optimizers, by their --optimizer names.
// "adamw" is torch.optim.AdamW as PyTorch runs it by default on CUDA
// (foreach); "adamw-fused" its fused=True kernel; "adamw-loop" a loop over
// the parameters (foreach=False, or a hand-written AdamW).
var Optimizers = []string{"adamw", "adamw-fused", "adamw-loop", "adamw8bit", "paged-adamw8bit", "sgd", "sgd-momentum", "adafactor", "none"}

// Checkpointing modes (activation recomputation).
var Checkpointing = []string{"none", "selective", "full"}

// Setup is how the model is trained (or run).
type Setup struct {
	// Precision of the weights: fp32, bf16, fp16, int8 or int4 (int8/int4:
	// a frozen, bitsandbytes-quantized base; compute in 16-bit).
	Precision string `json:"precision"`
	// AMP is PyTorch's automatic mixed precision: fp32 weights, gradients
	// and optimizer state, matmuls in bf16 under torch.autocast (which
	// caches a 16-bit copy of every weight it casts).
	AMP bool `json:"amp"`
	// Mixed is DeepSpeed's and Megatron's mixed precision: 16-bit weights
	// and gradients with fp32 master weights beside them.
	Mixed bool `json:"mixed"`
	// Optimizer is one of Optimizers; "none" is inference (no backward).
	Optimizer     string `json:"optimizer"`
	Batch         int64  `json:"batch"`
	Seq           int64  `json:"seq"`
	Checkpointing string `json:"checkpointing"`
	// Attention is the implementation: sdpa (transformers' default),
	// eager or flash (FlashAttention 2); Flash is the same as "flash".
	Attention string `json:"attention"`
	Flash     bool   `json:"flash"`
	// NewTokens > 0 with Optimizer "none" generates that many tokens after
	// a prompt of Seq tokens, keeping a KV cache.
	NewTokens int64 `json:"new_tokens"`
	// StaticCache: the generation's KV cache is allocated at its full
	// length before the prompt is read (transformers' "static" cache,
	// used with torch.compile), not grown a token at a time.
	StaticCache bool `json:"static_cache,omitempty"`
	// LoRARank > 0 trains rank-r adapters on every linear layer of the
	// blocks; the base stays frozen at Precision (int4: QLoRA).
	LoRARank int64 `json:"lora_rank"`
	// ZeRO stage 0–3 over World data-parallel GPUs: 1 shards optimizer
	// states (and master weights), 2 also gradients, 3 also parameters.
	ZeRO  int   `json:"zero"`
	World int64 `json:"world"`
	// Offload keeps optimizer state (and master weights) in CPU memory
	// (ZeRO-Offload, FSDP's CPUOffloadPolicy).
	Offload bool `json:"offload_optimizer"`
}

// Model is what is known of the model: its architecture, or its parameter
// count (Params > 0 overrides the architecture's count, whose dimensions
// then serve the activations only).
type Model struct {
	Arch   *Arch
	Params int64
}

// Inputs is everything an estimate starts from.
type Inputs struct {
	Model
	Setup
	GPU *GPU
}

// Result is an estimate (schema torchmem.estimate/v1): bytes per GPU.
type Result struct {
	Schema string `json:"schema"`
	// Source is "formula" (from the model's facts) or "measurement" (a
	// snapshot projected to another batch size or sequence length).
	Source                  string `json:"source"`
	Architecture            *Arch  `json:"architecture"`
	Setup                   Setup  `json:"setup"`
	ParameterCount          int64  `json:"parameter_count"`
	TrainableParameterCount int64  `json:"trainable_parameter_count"`
	ParametersBytes         int64  `json:"parameters_bytes"`
	MasterWeightsBytes      int64  `json:"master_weights_bytes"`
	GradientsBytes          int64  `json:"gradients_bytes"`
	OptimizerStateBytes     int64  `json:"optimizer_state_bytes"`
	// ActivationsBytes is what the step's blocks and head keep for
	// backward at its start (in inference: the largest working set of a
	// forward); null when the architecture is unknown.
	ActivationsBytes *int64 `json:"activations_bytes"`
	// AttentionBytes is the part of the activations that grows with the
	// square of the sequence (attention scores, softmax, dropout).
	AttentionBytes *int64 `json:"attention_bytes"`
	// ActivationsTextbookBytes is Korthikanti et al.'s count (2022, §4)
	// generalised to this model: what a Megatron layer must keep, without
	// the real stack's extra tensors.
	ActivationsTextbookBytes *int64 `json:"activations_textbook_bytes"`
	// LogitsBytes is the loss's (or, in inference, the head's) buffers of
	// batch × seq × vocab at their largest.
	LogitsBytes int64 `json:"logits_bytes"`
	// AutocastCacheBytes is autocast's 16-bit copies of the weights, live
	// from forward into backward.
	AutocastCacheBytes int64 `json:"autocast_cache_bytes"`
	// WorkspaceBytes is cuBLAS's workspaces (one per thread that runs
	// matmuls: forward and autograd), held by the caching allocator.
	WorkspaceBytes int64 `json:"workspace_bytes"`
	// OptimizerStepBytes is the optimizer step's scratch (PyTorch's
	// foreach AdamW: one tensor per parameter).
	OptimizerStepBytes int64 `json:"optimizer_step_bytes"`
	// KVCacheBytes is a generation's KV cache at its largest.
	KVCacheBytes int64 `json:"kv_cache_bytes"`
	// PeakPhase is the phase of the step where TotalBytes is reached;
	// Phases the estimate at every phase considered.
	PeakPhase string      `json:"peak_phase"`
	Phases    []PhasePeak `json:"phases"`
	// ActivationsFloorBytes is the guide's simpler rule: one hidden state
	// per layer plus one layer's attention scores.
	ActivationsFloorBytes *int64 `json:"activations_floor_bytes"`
	// AttentionScoresLayerBytes is batch × heads × seq² × bytes: one
	// layer's attention score matrix.
	AttentionScoresLayerBytes *int64 `json:"attention_scores_layer_bytes"`
	// WorkingBytes is memory held only while a layer runs: ZeRO-3's
	// gathered parameters of one block.
	WorkingBytes int64 `json:"working_bytes"`
	// OtherBytes is measured memory of none of the parts above
	// (workspaces, optimizer-step scratch, unknown); 0 for formulas.
	OtherBytes int64 `json:"other_bytes"`
	// TotalBytes is the peak of the step: the largest of Phases.
	TotalBytes int64 `json:"total_bytes"`
	GPU        *GPU  `json:"gpu"`
	// Fits is null without a GPU (or when the activations are unknown and
	// the rest fits).
	Fits *bool `json:"fits"`
	// Plan is the cheapest combination of techniques that fits the GPU
	// (empty when it fits as is); PlanTotalBytes its total, PlanFits whether
	// even the best combination fits.
	Plan           []Step `json:"plan"`
	PlanTotalBytes *int64 `json:"plan_total_bytes"`
	PlanFits       *bool  `json:"plan_fits"`
	// Techniques is each technique alone: its saving and cost.
	Techniques []Step    `json:"techniques"`
	Formulas   []string  `json:"formulas"`
	Notes      []string  `json:"notes"`
	Measured   *Measured `json:"measured,omitempty"`
}

// Step is one technique of a plan.
type Step struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// SavingBytes is what the technique saves: alone, or (in a plan) what
	// removing it from the plan would cost.
	SavingBytes int64  `json:"saving_bytes"`
	Cost        string `json:"cost"`
	// TotalBytes is the total with the technique (alone, or the plan's).
	TotalBytes int64 `json:"total_bytes"`
}

// Measured is set when the estimate projects a measured run: the size it
// was measured at, the size projected to, and the measured peak.
type Measured struct {
	Path           string `json:"path"`
	FromBatch      int64  `json:"from_batch"`
	FromSeq        int64  `json:"from_seq"`
	ToBatch        int64  `json:"to_batch"`
	ToSeq          int64  `json:"to_seq"`
	PeakBytes      int64  `json:"measured_peak_bytes"`
	PeakPhase      string `json:"measured_peak_phase"`
	ProjectedPhase string `json:"projected_peak_phase"`
}

// defaults fills the unset parts of a setup.
func (s *Setup) defaults() {
	if s.Precision == "" {
		s.Precision = "fp32"
	}
	if s.Optimizer == "" {
		s.Optimizer = "adamw"
	}
	if s.Checkpointing == "" {
		s.Checkpointing = "none"
	}
	if s.Flash {
		s.Attention = "flash"
	}
	if s.Attention == "" {
		s.Attention = "sdpa"
	}
	s.Flash = s.Attention == "flash"
	if s.Batch == 0 {
		s.Batch = 1
	}
	if s.Seq == 0 {
		s.Seq = 2048
	}
	if s.World == 0 {
		s.World = 1
	}
}

func oneOf(v string, set []string) bool {
	for _, s := range set {
		if v == s {
			return true
		}
	}
	return false
}

// check reports the first inconsistency of the inputs.
func (in *Inputs) check() error {
	s := &in.Setup
	switch {
	case !oneOf(s.Precision, Precisions):
		return fmt.Errorf("precision %q: want one of %s", s.Precision, strings.Join(Precisions, ", "))
	case !oneOf(s.Optimizer, Optimizers):
		return fmt.Errorf("optimizer %q: want one of %s", s.Optimizer, strings.Join(Optimizers, ", "))
	case !oneOf(s.Checkpointing, Checkpointing):
		return fmt.Errorf("checkpointing %q: want one of %s", s.Checkpointing, strings.Join(Checkpointing, ", "))
	case !oneOf(s.Attention, Attentions):
		return fmt.Errorf("attention %q: want one of %s", s.Attention, strings.Join(Attentions, ", "))
	case s.AMP && s.Precision != "fp32":
		return fmt.Errorf("AMP keeps fp32 weights and computes in bf16 under autocast: drop --precision %s (or drop --amp for %s weights)", s.Precision, s.Precision)
	case s.AMP && s.Mixed:
		return fmt.Errorf("--amp (PyTorch: fp32 weights, autocast) and --mixed (DeepSpeed/Megatron: 16-bit weights, fp32 master copy) are different setups: give one")
	case s.NewTokens < 0 || s.NewTokens > 1<<24:
		return fmt.Errorf("new tokens %d: want 0 to %d", s.NewTokens, 1<<24)
	case s.NewTokens > 0 && s.training():
		return fmt.Errorf("generating %d new tokens is inference: give --optimizer none", s.NewTokens)
	case s.StaticCache && s.NewTokens == 0:
		return fmt.Errorf("a static KV cache is a generation's: give --new-tokens")
	case s.Batch < 1 || s.Batch > 1<<20:
		return fmt.Errorf("batch %d: want 1 to %d", s.Batch, 1<<20)
	case s.Seq < 1 || s.Seq > 1<<24:
		return fmt.Errorf("sequence length %d: want 1 to %d", s.Seq, 1<<24)
	case s.ZeRO < 0 || s.ZeRO > 3:
		return fmt.Errorf("ZeRO stage %d: want 0 to 3", s.ZeRO)
	case s.World < 1 || s.World > 1<<20:
		return fmt.Errorf("world size %d: want 1 or more GPUs", s.World)
	case s.Mixed && !s.sixteenBit():
		return fmt.Errorf("mixed precision keeps fp32 master weights of 16-bit weights: give --precision bf16 or fp16")
	case s.LoRARank < 0:
		return fmt.Errorf("LoRA rank %d: want a positive rank", s.LoRARank)
	case s.LoRARank > 0 && s.Mixed:
		return fmt.Errorf("LoRA trains fp32 adapters on a frozen base: --mixed does not apply")
	case s.LoRARank > 0 && s.Optimizer == "none":
		return fmt.Errorf("LoRA trains adapters: give an optimizer other than none")
	case s.quantized() && s.LoRARank == 0 && s.Optimizer != "none":
		return fmt.Errorf("%s weights are frozen: train adapters with --lora R (QLoRA), or estimate inference with --optimizer none", s.Precision)
	}
	if in.Arch == nil && in.Params <= 0 {
		return errors.New("no model: give a parameter count or an architecture")
	}
	if in.Arch != nil {
		in.Arch.fill()
		if in.Params > 0 {
			if in.Arch.Hidden <= 0 || in.Arch.Layers <= 0 || in.Arch.Heads <= 0 {
				return errors.New("activations need the hidden size, the layers and the heads")
			}
		} else if err := in.Arch.Validate(); err != nil {
			return err
		}
		if b := max(approxActivations(in.Arch, s), stepBound(in.Arch, *s)); b > maxBytes {
			return fmt.Errorf("activations of %.3g bytes are beyond any device: give a smaller batch or sequence", b)
		}
		if s.LoRARank > 0 && (s.LoRARank > in.Arch.Hidden || in.Params > 0 && in.Arch.FFN <= 0) {
			return fmt.Errorf("LoRA rank %d needs the full architecture and a rank below the hidden size", s.LoRARank)
		}
	} else if s.LoRARank > 0 {
		return errors.New("LoRA adapts each linear layer: give the architecture (--config or --hidden/--layers/--heads/--ffn/--vocab)")
	}
	return nil
}

// maxBytes bounds what an estimate computes (an exabyte): int64 bytes
// stay far from overflow.
const maxBytes = 1e18

// approxActivations is an upper bound of the activation bytes in float64:
// every layer's tensors with the widest element and dropout.
func approxActivations(a *Arch, s *Setup) float64 {
	sb := float64(s.Seq) * float64(s.Batch)
	h, f, heads := float64(a.Hidden), float64(max(a.FFN, 4*a.Hidden)), float64(a.Heads)
	layer := sb*(12*h+4*f+4*heads)*4 + 9*heads*float64(s.Seq)*sb
	return float64(a.Layers+1)*layer + 4*sb*float64(a.Vocab) + 4*sb*h
}

func (s *Setup) sixteenBit() bool { return s.Precision == "bf16" || s.Precision == "fp16" }
func (s *Setup) quantized() bool  { return s.Precision == "int8" || s.Precision == "int4" }
func (s *Setup) training() bool   { return s.Optimizer != "none" }

// weightBits is the storage of one weight of the base model.
func (s *Setup) weightBits() int64 {
	switch s.Precision {
	case "fp32":
		return 32
	case "int8":
		return 8
	case "int4":
		return 4
	}
	return 16
}

// actBytes is the element size of activations: 4 in fp32, 2 when compute
// is 16-bit (mixed, pure 16-bit, or a quantized base).
func (s *Setup) actBytes() int64 {
	if s.Precision == "fp32" {
		return 4
	}
	return 2
}

// Compute estimates the memory per GPU of the inputs. With a GPU it also
// says whether it fits and searches the cheapest plan that does.
func Compute(in Inputs) (*Result, error) {
	in.Setup.defaults()
	if err := in.check(); err != nil {
		return nil, err
	}
	r := computeSetup(in)
	r.Formulas = Formulas(in)
	r.Techniques = singles(in, r)
	if in.GPU != nil {
		planFor(in, r)
	}
	return r, nil
}

// computeSetup is the arithmetic of one setup (no plan).
func computeSetup(in Inputs) *Result {
	s := in.Setup
	r := &Result{Schema: SchemaID, Source: "formula", Architecture: in.Arch, Setup: s, GPU: in.GPU,
		Plan: []Step{}, Techniques: []Step{}, Notes: []string{}, Phases: []PhasePeak{}}
	states(in, r)
	if in.Arch != nil {
		act := activations(in.Arch, s)
		r.ActivationsTextbookBytes = &act.total
		r.ActivationsFloorBytes, r.AttentionScoresLayerBytes = &act.floor, &act.scoresLayer
	}
	stepPeaks(in, r)
	if in.GPU != nil {
		fits := r.TotalBytes <= in.GPU.UsableBytes
		if !fits || r.ActivationsBytes != nil {
			r.Fits = &fits
		}
	}
	r.Notes = notes(in, r)
	return r
}
