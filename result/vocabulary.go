package result

// The words of a result: confidence levels, phases and memory categories,
// each written to and read from the JSON by name.

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Confidence grades a classification or a finding.
type Confidence string

// Confidence levels.
const (
	High   Confidence = "high"
	Medium Confidence = "medium"
	Low    Confidence = "low"
)

// Phase is a part of a training step.
type Phase string

// Phases.
const (
	PhaseForward   Phase = "forward"
	PhaseBackward  Phase = "backward"
	PhaseOptimizer Phase = "optimizer"
	PhaseZeroGrad  Phase = "zero_grad"
	PhaseData      Phase = "data"
	PhaseUnknown   Phase = "unknown"
	// PhaseBeforeRecording labels memory allocated before the trace began
	// (only in PhaseBytes, never in spans).
	PhaseBeforeRecording Phase = "before_recording"
)

// Category is what a block of memory is (a byte: each block has one; −1
// stands for any where a pass takes one).
type Category int8

// Categories: PyTorch's memory-profiler categories in its plot order, then
// kinds that profiler has no name for — an inference server's key/value
// cache (kv_cache: it is neither weights nor activations, and sized by the
// server, not the batch), a library's persistent workspace (workspace:
// cuBLAS's per-handle buffer), autocast's 16-bit copies of fp32 weights
// (autocast_cache: neither weights nor activations, and gone with the
// autocast region) and the memory a captured CUDA graph keeps in its
// private pool (cuda_graph_pool: its output and intermediates, held while
// the graph lives) — and unknown last. Kinds that are a variant of a
// category keep it under a rule of their own: quantized or frozen weights
// are parameters.
const (
	Parameter Category = iota
	Gradient
	OptimizerState
	Activation
	Temporary
	AutogradDetail
	InputData
	KVCache
	Workspace
	AutocastCache
	CUDAGraphPool
	Unknown
	NumCategories
)

var categoryNames = [NumCategories]string{"parameter", "gradient", "optimizer_state", "activation", "temporary", "autograd_detail", "input", "kv_cache", "workspace", "autocast_cache", "cuda_graph_pool", "unknown"}

// String returns the category's JSON name.
func (c Category) String() string {
	if c >= 0 && c < NumCategories {
		return categoryNames[c]
	}
	return "unknown"
}

// MarshalJSON writes the category's name.
func (c Category) MarshalJSON() ([]byte, error) { return json.Marshal(c.String()) }

// UnmarshalJSON reads a category name.
func (c *Category) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	cat, ok := ParseCategory(s)
	if !ok {
		return fmt.Errorf("unknown category %q", s)
	}
	*c = cat
	return nil
}

// ParseCategory maps a JSON name to a Category.
func ParseCategory(s string) (Category, bool) {
	for i, n := range categoryNames {
		if n == s {
			return Category(i), true
		}
	}
	return Unknown, false
}

// Categories holds bytes per category; its JSON always has every key, in a
// fixed order.
type Categories [NumCategories]int64

// Total sums all categories.
func (c Categories) Total() int64 {
	var t int64
	for _, v := range c {
		t += v
	}
	return t
}

// MarshalJSON writes an object with every category key.
func (c Categories) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, v := range c {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%d", categoryNames[i], v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads the object written by MarshalJSON (baselines).
func (c *Categories) UnmarshalJSON(b []byte) error {
	var m map[string]int64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	for k, v := range m {
		if cat, ok := ParseCategory(k); ok {
			c[cat] = v
		}
	}
	return nil
}
