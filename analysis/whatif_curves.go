package analysis

import "math"

// part is a share of allocated memory that a projection scales on its own.
type part int

// Parts of allocated memory, by how they change with the batch size, the
// sequence length and the suggestions.
const (
	partParam     part = iota // parameters
	partGrad                  // gradients
	partStaleGrad             // the previous step's gradients, alive in a forward until zero_grad frees them
	partOpt                   // optimizer state
	partFixed                 // unknown, workspaces, optimizer and zero_grad scratch: independent of the batch
	partLinear                // activations, temporaries, autograd detail and inputs of a step: ∝ batch·seq
	partQuad                  // the same allocated in attention code: ∝ batch·seq² (scores, softmax)
	partKV                    // a generation's KV cache in a cache class: ∝ batch·seq, untouched by the activation techniques
	numParts
)

// curves are the bytes of each part after every event: index 0 is before
// the first event, index j+1 after event j.
type curves struct {
	h *History
	v [numParts][]int64
}

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
	f[partLinear], f[partQuad], f[partKV] = kb*ks, kb*ks*ks, kb*ks
	return f
}

// partOf decides the part of a block: by category, then (for what a step
// allocates) by the phase that allocated it and whether it has two
// sequence dimensions (seqSquared).
func (h *History) partOf(b *Block, stale, seqSquared bool) part {
	if b.Untracked {
		return partFixed
	}
	switch b.Category {
	case Parameter:
		return partParam
	case Gradient:
		if stale {
			return partStaleGrad
		}
		return partGrad
	case OptimizerState:
		return partOpt
	case KVCache:
		// A serving engine's pool (vLLM, SGLang) is sized by its memory
		// fraction, not by the batch; a cache class (transformers') holds
		// batch × tokens × layers of keys and values.
		if h.markers.get(b.Stack).kvPool {
			return partFixed
		}
		return partKV
	case Activation, Temporary, AutogradDetail, InputData:
		if b.Alloc >= 0 {
			if ph := h.Phases.At(b.Alloc); ph == PhaseOptimizer || ph == PhaseZeroGrad {
				return partFixed
			}
		}
		if b.Category != InputData && seqSquared {
			return partQuad
		}
		return partLinear
	}
	return partFixed
}

// scales reports whether the batch size or the sequence length scale a part.
func scales(p part) bool { return p == partLinear || p == partQuad || p == partKV }

// quadratic reports whether a stack's tensors grow with the square of the
// sequence: attention code, unless a fused kernel (flash, memory-efficient,
// cuDNN) made them.
func (m stackMarkers) quadratic() bool { return m.attention && !m.fusedAttention }

// staleGradients marks the gradient blocks that zero_grad frees and that are
// alive during a forward span: kept from the previous step (set_to_none).
func (h *History) staleGradients() map[int]bool {
	stale := map[int]bool{}
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.Category != Gradient || b.Rule != RuleFreedByZeroGrad {
			continue
		}
		for _, sp := range h.Phases.Spans {
			if sp.Phase == PhaseForward && sp.Events > 0 && b.LiveAt(sp.StartEvent) {
				stale[bi] = true
				break
			}
		}
	}
	return stale
}

// buildCurves computes the parts' curves of a device; seq is the
// sequence length of the run when known (0 otherwise), which sharpens
// which tensors are seq² (seqSquared). A block of a part that scales
// counts the bytes its tensor requested there; the allocator's rounding
// on top (under 1 MiB a block) does not grow with the tensor and is
// fixed memory.
func buildCurves(h *History, seq int64) *curves {
	n := len(h.Device.Events)
	c := &curves{h: h}
	var delta [numParts][]int64
	for p := range delta {
		delta[p] = make([]int64, n+2)
	}
	stale := h.staleGradients()
	sq := h.seqSquared(seq)
	copies := h.weightCopies()
	add := func(p part, b *Block, n int64) {
		delta[p][b.Alloc+1] += n
		if end := b.allocEnd(); end >= 0 {
			delta[p][end+1] -= n
		}
	}
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.PendingAtStart {
			continue // holds memory, never allocated (Block.LiveAt)
		}
		p := h.partOf(b, stale[bi], sq[bi])
		if copies[bi] && scales(p) {
			p = partFixed // a weight's copy: the weight's size, whatever the batch
		}
		if scales(p) && b.Requested > 0 && b.Requested < b.Size {
			add(p, b, b.Requested)
			add(partFixed, b, b.Size-b.Requested)
			continue
		}
		add(p, b, b.Size)
	}
	for p := range c.v {
		c.v[p] = make([]int64, n+1)
		var run int64
		for j := 0; j <= n; j++ {
			run += delta[p][j]
			c.v[p][j] = run
		}
	}
	return c
}

// at is the projected bytes at index j.
func (c *curves) at(j int, f factors) float64 {
	var t float64
	for p := range c.v {
		t += f[p] * float64(c.v[p][j])
	}
	return t
}

// peak is the projected peak under f and the index where it is reached.
func (c *curves) peak(f factors) (int64, int) {
	best, bj := math.Inf(-1), 0
	for j := range c.v[0] {
		if t := c.at(j, f); t > best {
			best, bj = t, j
		}
	}
	return saturate(best), bj
}

// saturate converts projected bytes to int64, at most math.MaxInt64 (a
// projection thousands of times its run can exceed it).
func saturate(x float64) int64 {
	if x >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(math.Round(x))
}

// phaseAt is the phase of index j (the event that led to it).
func (c *curves) phaseAt(j int) Phase {
	if j == 0 {
		return PhaseBeforeRecording
	}
	return c.h.Phases.At(j - 1)
}

// maxOf is the largest value of some parts together over the run.
func (c *curves) maxOf(parts ...part) int64 {
	var best int64
	for j := range c.v[0] {
		var t int64
		for _, p := range parts {
			t += c.v[p][j]
		}
		best = max(best, t)
	}
	return best
}

// maxFactor is the largest k such that the curve with the step's parts
// scaled by k (batch: linear, KV cache and attention parts ×k; sequence:
// linear and KV cache ×k, attention ×k²) stays within limit; +Inf when the step's parts are empty,
// 0 when even k→0 does not fit.
func (c *curves) maxFactor(limit int64, seq bool) float64 {
	k := math.Inf(1)
	for j := range c.v[0] {
		fixed := float64(0)
		for p := range c.v {
			if part(p) != partLinear && part(p) != partQuad && part(p) != partKV {
				fixed += float64(c.v[p][j])
			}
		}
		lin, quad := float64(c.v[partLinear][j]+c.v[partKV][j]), float64(c.v[partQuad][j])
		room := float64(limit) - fixed
		if room < 0 {
			return 0
		}
		var kj float64
		switch {
		case !seq && lin+quad > 0:
			kj = room / (lin + quad)
		case seq && quad > 0:
			kj = (-lin + math.Sqrt(lin*lin+4*quad*room)) / (2 * quad)
		case seq && lin > 0:
			kj = room / lin
		default:
			continue
		}
		k = min(k, kj)
	}
	return k
}
