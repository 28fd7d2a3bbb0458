package result

// WhatIf projects the measured run of one device: its peak under each
// suggestion and under the best combination of them, how the peak scales
// with the batch size and the sequence length, and the model facts the
// measurement shows. Projections scale the measured curves part by part
// (parameters, gradients, optimizer state, fixed memory, the step's
// activations ∝ batch·seq and attention ∝ batch·seq²) at every event, so
// the projected peak may move to another phase.
type WhatIf struct {
	Device            int   `json:"device" null:"-1"` // −1 (null): host memory
	MeasuredPeakBytes int64 `json:"measured_peak_bytes"`
	// FixedBytes, LinearBytes and AttentionBytes split the measured peak:
	// what the batch and sequence do not change, what grows with
	// batch·seq (activations, and a KV cache kept by a cache class), what
	// grows with batch·seq².
	FixedBytes     int64 `json:"fixed_bytes"`
	LinearBytes    int64 `json:"linear_bytes"`
	AttentionBytes int64 `json:"attention_bytes"`
	// CapacityBytes is the device's memory (the file's, or --gpu), 0 when
	// unknown; UsableBytes the share a projection may fill.
	CapacityBytes int64         `json:"capacity_bytes"`
	UsableBytes   int64         `json:"usable_bytes"`
	Model         InferredModel `json:"model"`
	Suggestions   []Projection  `json:"suggestions"`
	// Combination is the cheapest set of suggestions that fits (with a
	// capacity), else every suggestion that keeps the result and the speed
	// within ~30%; null when no suggestion can be projected.
	Combination *Combination `json:"combination"`
	Scaling     []ScalePoint `json:"scaling"`
	// MaxBatchFactor and MaxSeqFactor are how far the batch size or the
	// sequence length could grow (×k) before the usable memory is full; 0
	// without a capacity.
	MaxBatchFactor float64  `json:"max_batch_factor"`
	MaxSeqFactor   float64  `json:"max_seq_factor"`
	Notes          []string `json:"notes"`
}

// Projection is the projected peak under one suggestion.
type Projection struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	PeakBytes int64  `json:"projected_peak_bytes"`
	Phase     Phase  `json:"projected_peak_phase"`
	// SavingBytes is the measured peak less the projected one.
	SavingBytes int64 `json:"saving_bytes"`
	Fits        *bool `json:"fits"`
	// Method is "technique" (its effect applied at every event),
	// "estimated_saving" (the suggestion's saving taken off the peak) or
	// "reserved_only" (it lowers reserved memory, not the allocated peak).
	Method string `json:"method"`
}

// Combination is a set of suggestions projected together.
type Combination struct {
	IDs       []string `json:"ids"`
	Titles    []string `json:"titles"`
	PeakBytes int64    `json:"projected_peak_bytes"`
	Phase     Phase    `json:"projected_peak_phase"`
	Fits      *bool    `json:"fits"`
}

// ScalePoint is the projected peak at BatchFactor × the batch size and
// SeqFactor × the sequence length.
type ScalePoint struct {
	BatchFactor float64 `json:"batch_factor"`
	SeqFactor   float64 `json:"seq_factor"`
	PeakBytes   int64   `json:"projected_peak_bytes"`
	Phase       Phase   `json:"projected_peak_phase"`
}

// InferredModel is what the measurement tells of the model, beside what
// package estimate computes for a model of that size.
type InferredModel struct {
	ParameterBytes      int64 `json:"parameter_bytes"`
	GradientBytes       int64 `json:"gradient_bytes"`
	OptimizerStateBytes int64 `json:"optimizer_state_bytes"`
	// StatePerParameterByte is optimizer state ÷ parameter bytes (0 when
	// either is unknown); Optimizer says what that ratio means.
	StatePerParameterByte float64 `json:"optimizer_state_per_parameter_byte"`
	Optimizer             string  `json:"optimizer"`
	// ParameterTensorBytes is what the parameter tensors requested, when
	// ParameterBytes (the allocator's blocks) is 1% more or over: the
	// count is of it.
	ParameterTensorBytes int64 `json:"parameter_tensor_bytes,omitempty"`
	// FrozenParameterBytes is the part of the parameters that is a frozen
	// base: weights that get no gradient while adapters or quantized layers
	// train (their optimizer state is the trained weights' alone, and
	// StatePerParameterByte is per trained parameter byte).
	FrozenParameterBytes int64 `json:"frozen_parameter_bytes,omitempty"`
	// DType is the parameters' dtype when the file says it ("" otherwise);
	// ParameterCount is the bytes the parameter tensors requested ÷ its
	// size (fp32 assumed when not known, as PyTorch's default) — of the
	// trained ones only when there is a frozen base (its dtype is unknown).
	DType          string `json:"dtype"`
	ParameterCount int64  `json:"parameter_count"`
	// EstimatedGradientBytes and EstimatedOptimizerStateBytes are package
	// estimate's figures for ParameterCount parameters of that dtype,
	// trained with the optimizer the ratio suggests (AdamW when unclear).
	EstimatedGradientBytes       int64 `json:"estimated_gradient_bytes"`
	EstimatedOptimizerStateBytes int64 `json:"estimated_optimizer_state_bytes"`
	// ActivationBytes is the largest the step's activations (∝ batch·seq
	// and ∝ batch·seq²) were; AttentionBytes its attention part then.
	ActivationBytes int64 `json:"activation_bytes"`
	AttentionBytes  int64 `json:"attention_bytes"`
	// KVCacheBytes is the largest a KV cache kept by a cache class was
	// (scaled with batch·seq, untouched by the activation techniques);
	// absent when there is none. A serving engine's pool is fixed memory.
	KVCacheBytes int64 `json:"kv_cache_bytes,omitempty"`
}

// MarshalJSON writes the projection, device null for host memory.
func (w WhatIf) MarshalJSON() ([]byte, error) {
	type plain WhatIf
	return marshalNulls(plain(w))
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (w *WhatIf) UnmarshalJSON(b []byte) error {
	type plain WhatIf
	return unmarshalNulls(b, (*plain)(w))
}
