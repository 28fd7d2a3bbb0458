package whatif

import (
	"sort"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/result"
)

// Part is a share of allocated memory that a projection scales on its own.
// One byte: the what-if keeps the part of every block (a long trace has
// millions), and the parts are a handful.
type Part uint8

// Parts of allocated memory, by how they change with the batch size, the
// sequence length and the suggestions.
const (
	PartParam      Part = iota // parameters
	PartGrad                   // gradients
	PartStaleGrad              // the previous step's gradients, alive in a forward until zero_grad frees them
	PartOpt                    // optimizer state
	PartFixed                  // unknown, workspaces, autocast's weight copies, parameters gathered from shards, optimizer and zero_grad scratch: independent of the batch
	PartLinear                 // activations a step keeps from forward for backward (what checkpointing recomputes): ∝ batch·seq
	PartQuad                   // the same with two sequence dimensions (attention scores, softmax): ∝ batch·seq²
	PartKV                     // a generation's KV cache in a cache class: ∝ batch·seq, untouched by the activation techniques
	PartLinearRest             // a step's temporaries, autograd detail and inputs, a CUDA graph's pool: ∝ batch·seq, not recomputed
	PartQuadRest               // the same with two sequence dimensions (the scores' gradients): ∝ batch·seq²
	PartBucket                 // DistributedDataParallel's gradient buckets: the gradients' size, kept for the model's life
	numParts
)

// linearParts and quadParts are the parts that scale with batch·seq and
// with batch·seq².
var (
	linearParts = []Part{PartLinear, PartLinearRest}
	quadParts   = []Part{PartQuad, PartQuadRest}
)

// factors multiply each part of a curve.
type factors [numParts]float64

// unit leaves every part as it is.
func unit() factors {
	var f factors
	for i := range f {
		f[i] = 1
	}
	return f
}

// scaled is unit with the step's parts scaled to kb × the batch and ks ×
// the sequence length.
func scaled(kb, ks float64) factors {
	f := unit()
	f[PartLinear], f[PartLinearRest], f[PartKV] = kb*ks, kb*ks, kb*ks
	f[PartQuad], f[PartQuadRest] = kb*ks*ks, kb*ks*ks
	return f
}

// PartOf decides the part of a block: by category, then (for what a step
// allocates) by the phase that allocated it, whether it has two sequence
// dimensions (seqSquared) and whether forward keeps it for backward (an
// activation: what checkpointing recomputes) or not (a temporary, the
// autograd engine's own buffers, an input).
func PartOf(h *history.History, b *history.Block, stale, seqSquared bool) Part {
	if b.Untracked {
		return PartFixed
	}
	switch b.Category {
	case result.Parameter:
		if b.Rule() == history.RuleShardedGathered {
			// a module's whole weights gathered from the shards for its
			// forward or backward: their size whatever the batch, and
			// whatever the number of ranks sharing them
			return PartFixed
		}
		return PartParam
	case result.Gradient:
		switch b.Rule() {
		case history.RuleDDPBucket:
			return PartBucket
		case history.RuleShardedGradients:
			if b.Free >= 0 && h.Phases.At(int(b.Free)) == result.PhaseBackward {
				// the reduce-scatter's input: a module's gradients on
				// their way to the shards, freed in the same backward
				return PartFixed
			}
		}
		if stale {
			return PartStaleGrad
		}
		return PartGrad
	case result.OptimizerState:
		return PartOpt
	case result.AutocastCache:
		return PartFixed // a weight's 16-bit copy: the weight's size, whatever the batch
	case result.KVCache:
		// A serving engine's pool (vLLM, SGLang) is sized by its memory
		// fraction, not by the batch; a cache class (transformers') holds
		// batch × tokens × layers of keys and values.
		if h.Markers.Get(b.Stack).KvPool {
			return PartFixed
		}
		return PartKV
	case result.CUDAGraphPool:
		// A graph's pool holds the forward it captured — its intermediates
		// and static outputs, of the batch and sequence the graph was
		// captured at: a graph captured at another size holds them to scale.
		return PartLinearRest
	case result.Activation, result.Temporary, result.AutogradDetail, result.InputData:
		if b.Alloc >= 0 {
			if ph := h.Phases.At(int(b.Alloc)); ph == result.PhaseOptimizer || ph == result.PhaseZeroGrad {
				return PartFixed
			}
		}
		kept := b.Category == result.Activation
		switch {
		case b.Category != result.InputData && seqSquared && kept:
			return PartQuad
		case b.Category != result.InputData && seqSquared:
			return PartQuadRest
		case kept:
			return PartLinear
		}
		return PartLinearRest
	}
	return PartFixed
}

// scales reports whether the batch size or the sequence length scale a part.
func scales(p Part) bool {
	return p == PartLinear || p == PartQuad || p == PartKV || p == PartLinearRest || p == PartQuadRest
}

// staleGradients marks the gradient blocks that zero_grad frees and that are
// alive when a forward span starts: kept from the previous step
// (set_to_none) — unless a backward starts before zero_grad frees them:
// then that backward adds to them (gradient accumulation over
// micro-batches), and the forward needs them.
func staleGradients(h *history.History) map[int]bool {
	stale := map[int]bool{}
	gradientsAcrossForward(h, stale)
	return stale
}

// AccumulatesGradients reports whether the run accumulates gradients over
// micro-batches: gradients that zero_grad frees live through a forward and
// the backward after it.
func AccumulatesGradients(h *history.History) bool {
	return gradientsAcrossForward(h, nil)
}

// gradientsAcrossForward marks the stale gradients in stale, and reports
// whether any gradient that zero_grad frees lives through a forward and
// the backward after it — at the first such, when stale is nil.
func gradientsAcrossForward(h *history.History, stale map[int]bool) (accumulated bool) {
	var starts, backwards []int
	for _, sp := range h.Phases.Spans {
		switch {
		case sp.Phase == result.PhaseForward && sp.Events > 0:
			starts = append(starts, sp.StartEvent)
		case sp.Phase == result.PhaseBackward && sp.StartEvent >= 0:
			backwards = append(backwards, sp.StartEvent)
		}
	}
	sort.Ints(starts)
	sort.Ints(backwards)
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.Category != result.Gradient || b.Rule() != history.RuleFreedByZeroGrad {
			continue
		}
		// The first forward start at or after the allocation: the block
		// is alive there unless its allocation has ended by then.
		k := sort.SearchInts(starts, int(b.Alloc))
		if k >= len(starts) || !b.LiveAt(starts[k]) {
			continue
		}
		if j := sort.SearchInts(backwards, starts[k]); j < len(backwards) && b.Free >= 0 && backwards[j] < int(b.Free) {
			if stale == nil {
				return true
			}
			accumulated = true // added to by the next backward
			continue
		}
		if stale != nil {
			stale[bi] = true
		}
	}
	return accumulated
}
