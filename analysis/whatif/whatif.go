package whatif

import (
	"math"

	"github.com/torchmem/torchmem/analysis/estimate"
	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/result"
)

// effect is what a suggestion does to the parts of memory: a factor per
// part, its cost weight (as in package estimate: 0 free, 1 minimal,
// 3 slower, 9 much slower, 27 changes what is trained or computed) and
// its exclusive group.
type effect struct {
	f      factors
	weight int
	group  string
	// oneGradient: the technique still makes each gradient for a moment
	// (DDP copies it into its bucket once autograd made it), so the
	// projected peak keeps room for the largest one.
	oneGradient bool
}

// effects are the techniques of the suggestions, as fractions that match
// each suggestion's own estimate: checkpointing keeps 35% of the
// activations forward keeps for backward (temporaries, the autograd
// engine's buffers and inputs stay as they are), a fused kernel 20% of the
// attention tensors, 8-bit states are a quarter of fp32 ones, autocast
// halves activations (the weights stay fp32), QLoRA keeps a quarter of
// 16-bit weights and trains only adapters.
func effects() map[string]effect {
	with := func(w int, group string, set func(f *factors)) effect {
		f := unit()
		set(&f)
		return effect{f: f, weight: w, group: group}
	}
	return map[string]effect{
		"activation_checkpointing": with(3, "", func(f *factors) { f[PartLinear], f[PartQuad] = 0.35, 0.35 }),
		"flash_attention":          with(0, "", func(f *factors) { f[PartQuad], f[PartQuadRest] = 0.2, 0.2 }),
		"mixed_precision_bf16":     with(1, "", func(f *factors) { stepFactors(f, 0.5, 0.5) }),
		"mixed_precision_fp16":     with(1, "", func(f *factors) { stepFactors(f, 0.5, 0.5) }),
		"optimizer_8bit":           with(1, "optimizer", func(f *factors) { f[PartOpt] = 0.25 }),
		"paged_optimizer":          with(1, "optimizer", func(f *factors) { f[PartOpt] = 0.25 }),
		"cpu_offload":              with(9, "optimizer", func(f *factors) { f[PartOpt] = 0 }),
		"gradient_accumulation":    with(3, "batch", func(f *factors) { stepFactors(f, 0.5, 0.5) }),
		"reduce_batch_size":        with(3, "batch", func(f *factors) { stepFactors(f, 0.5, 0.5) }),
		"reduce_sequence_length":   with(27, "", func(f *factors) { stepFactors(f, 0.5, 0.25) }),
		"set_to_none":              with(0, "", func(f *factors) { f[PartStaleGrad] = 0 }),
		// each .grad a view of its bucket: the buckets stay, the gradients
		// beside them go but for the one autograd just made
		"ddp_bucket_view": oneGradient(with(0, "", func(f *factors) { f[PartGrad], f[PartStaleGrad] = 0, 0 })),
		"qlora": with(27, "weights", func(f *factors) {
			f[PartParam], f[PartGrad], f[PartStaleGrad], f[PartBucket], f[PartOpt] = 0.25, 0, 0, 0, 0
		}),
		"quantize_weights": with(27, "weights", func(f *factors) { f[PartParam] = 0.5 }),
		// sharded over 2 GPUs: each keeps half the weights and their states
		"shard_states": with(9, "", func(f *factors) {
			f[PartParam], f[PartGrad], f[PartStaleGrad], f[PartBucket], f[PartOpt] = 0.5, 0.5, 0.5, 0.5, 0.5
		}),
		"use_cache_off": with(0, "", func(f *factors) { f[PartKV] = 0 }),
	}
}

// oneGradient marks an effect that keeps room for one gradient.
func oneGradient(e effect) effect {
	e.oneGradient = true
	return e
}

// stepFactors sets the factors of a step's memory: lin for what grows with
// batch·seq, quad for what grows with batch·seq².
func stepFactors(f *factors, lin, quad float64) {
	f[PartLinear], f[PartLinearRest], f[PartQuad], f[PartQuadRest] = lin, lin, quad, quad
}

// reservedOnly are suggestions that lower reserved memory, not allocated.
var reservedOnly = map[string]bool{"expandable_segments": true, "empty_cache": true}

// compose multiplies the factors of several effects.
func compose(fs ...factors) factors {
	out := unit()
	for _, f := range fs {
		for p := range out {
			out[p] *= f[p]
		}
	}
	return out
}

// Compute projects the device of h (its result dr) under the suggestions.
// capacity is the device memory to fit (0: unknown). seqSquared is
// SeqSquared(h) where the caller has it (the suggestions' evidence does),
// nil to make it here.
func Compute(h *history.History, dr *result.DeviceResult, sugg []result.Suggestion, capacity int64, seqSquared []bool) *result.WhatIf {
	if h == nil || len(h.Device.Events) == 0 {
		return nil
	}
	if len(seqSquared) != len(h.Blocks) {
		seqSquared = SeqSquared(h)
	}
	c := buildCurvesWith(h, seqSquared)
	var w *result.WhatIf
	c.resolve(func() { w = c.whatIf(dr, sugg, capacity) })
	return w
}

// whatIf is Compute on the curves of the device (see curves.resolve).
func (c *curves) whatIf(dr *result.DeviceResult, sugg []result.Suggestion, capacity int64) *result.WhatIf {
	h := c.h
	peak, pj := c.peak(unit())
	w := &result.WhatIf{Device: dr.Device, MeasuredPeakBytes: peak, Suggestions: []result.Projection{}, Scaling: []result.ScalePoint{}, Notes: []string{}}
	at := c.at(pj)
	w.LinearBytes, w.AttentionBytes = at[PartLinear]+at[PartLinearRest]+at[PartKV], at[PartQuad]+at[PartQuadRest]
	w.FixedBytes = peak - w.LinearBytes - w.AttentionBytes
	if capacity > 0 {
		w.CapacityBytes = capacity
		w.UsableBytes = estimate.NewGPU("", capacity).UsableBytes
	}
	oom := dr.OOM != nil
	fits := func(b int64) *bool {
		// After an OOM the step did not finish: a projection is a lower
		// bound, which can only show that something does not fit.
		if w.UsableBytes == 0 || oom && b <= w.UsableBytes {
			return nil
		}
		ok := b <= w.UsableBytes
		return &ok
	}
	planUsable := w.UsableBytes
	if oom {
		planUsable = 0
	}
	eff := effects()
	var known []result.Suggestion
	w.Suggestions, known = projectSuggestions(c, unit(), sugg, eff, fits)
	w.Combination = bestCombination(c, unit(), known, eff, planUsable)
	if w.Combination != nil {
		w.Combination.Fits = fits(w.Combination.PeakBytes)
	}
	for _, k := range []struct{ b, s float64 }{{0.5, 1}, {2, 1}, {4, 1}, {8, 1}, {1, 0.5}, {1, 2}, {1, 4}, {1, 8}} {
		b, j := c.peak(scaled(k.b, k.s))
		w.Scaling = append(w.Scaling, result.ScalePoint{BatchFactor: k.b, SeqFactor: k.s, PeakBytes: b, Phase: c.phaseAt(j)})
	}
	if planUsable > 0 {
		w.MaxBatchFactor = roundFactor(c.maxFactor(w.UsableBytes, false))
		w.MaxSeqFactor = roundFactor(c.maxFactor(w.UsableBytes, true))
	}
	w.Model = inferModel(h, c)
	if w.AttentionBytes > 0 {
		w.Notes = append(w.Notes, "∝ seq²: attention tensors larger than their call's per-token output (scores, softmax)")
	}
	if dr.OOM != nil {
		w.Notes = append(w.Notes, "the run died at an OOM in "+string(dr.OOM.Phase)+": projections are lower bounds (the step did not finish)")
	}
	if w.LinearBytes+w.AttentionBytes == 0 {
		w.Notes = append(w.Notes, "nothing live at the peak grows with the batch or the sequence")
	}
	return w
}

// projectSuggestions projects each suggestion on top of base (a batch or
// sequence scaling, or none) and returns the projections and the
// suggestions whose effect is known.
func projectSuggestions(c *curves, base factors, sugg []result.Suggestion, eff map[string]effect, fits func(int64) *bool) ([]result.Projection, []result.Suggestion) {
	peak, pj := c.peak(base)
	out := []result.Projection{}
	var known []result.Suggestion
	for _, s := range sugg {
		p := result.Projection{ID: s.ID, Title: s.Title}
		switch e, ok := eff[s.ID]; {
		case ok:
			var j int
			p.PeakBytes, j = c.peak(compose(base, e.f))
			if e.oneGradient {
				p.PeakBytes = min(peak, p.PeakBytes+c.largestGradient())
			}
			p.Phase, p.Method = c.phaseAt(j), "technique"
			known = append(known, s)
		case reservedOnly[s.ID]:
			p.PeakBytes, p.Phase, p.Method = peak, c.phaseAt(pj), "reserved_only"
		default:
			p.PeakBytes, p.Phase, p.Method = max(peak-s.EstimatedSavingsBytes, 0), c.phaseAt(pj), "estimated_saving"
		}
		p.SavingBytes, p.Fits = peak-p.PeakBytes, fits(p.PeakBytes)
		out = append(out, p)
	}
	return out, known
}

// roundFactor keeps two decimals (and +Inf as 0: unbounded is unknown).
func roundFactor(k float64) float64 {
	if math.IsInf(k, 0) || math.IsNaN(k) {
		return 0
	}
	return math.Floor(k*100) / 100
}

// bestCombination chooses among the suggestions with known effects: with
// a usable size, the cheapest combination that fits (least cost weight,
// then fewest suggestions, then lowest peak), else the one with the lowest
// peak; without one, every suggestion of weight ≤ 3 (the best of each
// exclusive group). At most 2¹² combinations.
func bestCombination(c *curves, base factors, known []result.Suggestion, eff map[string]effect, usable int64) *result.Combination {
	if len(known) == 0 {
		return nil
	}
	if len(known) > 12 {
		known = known[:12]
	}
	type cand struct {
		mask    int
		peak    int64
		j, w, n int
	}
	var best, least *cand
	for mask := 1; mask < 1<<len(known); mask++ {
		groups := map[string]bool{}
		var fs []factors
		w, n, ok, oneGrad := 0, 0, true, false
		for i, s := range known {
			if mask&(1<<i) == 0 {
				continue
			}
			e := eff[s.ID]
			if e.group != "" && groups[e.group] {
				ok = false
				break
			}
			groups[e.group] = true
			fs = append(fs, e.f)
			w += e.weight
			n++
			oneGrad = oneGrad || e.oneGradient
			if usable == 0 && e.weight > 3 {
				ok = false
			}
		}
		if !ok {
			continue
		}
		p, j := c.peak(compose(append(fs, base)...))
		if oneGrad {
			p += c.largestGradient()
		}
		cd := &cand{mask: mask, peak: p, j: j, w: w, n: n}
		if least == nil || p < least.peak || p == least.peak && w < least.w {
			least = cd
		}
		if usable > 0 && p <= usable && (best == nil || w < best.w || w == best.w && (n < best.n || n == best.n && p < best.peak)) {
			best = cd
		}
	}
	if best == nil {
		best = least
	}
	if best == nil {
		return nil
	}
	out := &result.Combination{PeakBytes: best.peak, Phase: c.phaseAt(best.j), IDs: []string{}, Titles: []string{}}
	for i, s := range known {
		if best.mask&(1<<i) != 0 {
			out.IDs = append(out.IDs, s.ID)
			out.Titles = append(out.Titles, s.Title)
		}
	}
	return out
}

// requested is the bytes the blocks of a category requested (tensor bytes,
// not the allocator's blocks) at index j of the curves.
func requested(h *history.History, j int, cat result.Category) int64 {
	n, _ := requestedFrozen(h, j, cat)
	return n
}

// requestedFrozen is requested, with the part of it that is a frozen base
// (weights that get no gradient while adapters or quantized layers train).
// Parameters gathered from their shards for a module's forward or
// backward are not counted: they are the shards' copies.
func requestedFrozen(h *history.History, j int, cat result.Category) (n, frozen int64) {
	for _, b := range h.LiveBlocks(j - 1) {
		if b.Category == cat && b.Rule() != history.RuleShardedGathered {
			n += b.Requested
			if r := b.Rule(); r == history.RuleFrozenWeights || r == history.RuleQuantizedWeights {
				frozen += b.Requested
			}
		}
	}
	return n, frozen
}

// near reports whether x is within 3% of want.
func near(x, want float64) bool { return math.Abs(x-want) <= 0.03*want }

// inferModel reads the model's facts from the curves.
func inferModel(h *history.History, c *curves) result.InferredModel {
	final := c.at(c.end())
	m := result.InferredModel{ParameterBytes: c.maxOf(PartParam), GradientBytes: c.maxOf(PartGrad, PartStaleGrad, PartBucket),
		OptimizerStateBytes: final[PartOpt]}
	if m.OptimizerStateBytes == 0 { // freed by the end: the largest it was
		m.OptimizerStateBytes = c.maxOf(PartOpt)
	}
	step := append(append([]Part{}, linearParts...), quadParts...)
	m.ActivationBytes = c.maxOf(step...)
	m.KVCacheBytes = c.maxOf(PartKV)
	if act, sum := c.partsAtMax(step...); sum == m.ActivationBytes {
		m.AttentionBytes = act[PartQuad] + act[PartQuadRest]
	}
	if len(h.Snap.GradAccumulations) > 0 {
		m.DType = "fp32"
		for _, g := range h.Snap.GradAccumulations {
			if g.DType != "float" {
				m.DType = g.DType
				break
			}
		}
	}
	if m.ParameterBytes == 0 {
		return m
	}
	// The ratio of the tensors' own bytes: the allocator's blocks round
	// parameters allocated before the recording differently.
	paramReq, frozen := requestedFrozen(h, c.argmax(PartParam), result.Parameter)
	if frozen >= paramReq {
		frozen = 0 // nothing trains beside them: no base to tell apart
	}
	m.FrozenParameterBytes = frozen
	if paramReq*100 < m.ParameterBytes*99 {
		// The blocks hold 1% more than the tensors or over: a count from
		// the blocks' bytes would be off as much.
		m.ParameterTensorBytes = paramReq
	}
	// The optimizer keeps state for the weights that train: a frozen base
	// (adapters, quantized layers) has none.
	trained := paramReq - frozen
	optJ := c.end()
	if final[PartOpt] == 0 {
		optJ = c.argmax(PartOpt)
	}
	r := float64(requested(h, optJ, result.OptimizerState)) / float64(max(trained, 1))
	m.StatePerParameterByte = math.Round(r*1000) / 1000
	setup := estimate.Setup{Precision: "fp32", Optimizer: "adamw"}
	switch {
	case m.OptimizerStateBytes == 0 && m.GradientBytes > 0:
		m.Optimizer, setup.Optimizer = "none: plain SGD, or no optimizer step recorded", "sgd"
	case m.OptimizerStateBytes == 0:
		m.Optimizer, setup.Optimizer = "", "none"
	case m.GradientBytes == 0:
		// Optimizer state but no gradient seen: gradients allocated before
		// the recording may be counted with the parameters; say less.
		m.Optimizer = "unclear: no gradients seen (counted as parameters?)"
	case near(r, 2):
		m.Optimizer = "2 states per parameter, in its dtype (Adam, AdamW)"
	case near(r, 1):
		m.Optimizer, setup.Optimizer = "1 state per parameter (SGD momentum, RMSprop)", "sgd-momentum"
	case near(r, 0.5):
		m.Optimizer, setup.Optimizer = "2 8-bit states per fp32 parameter (8-bit Adam)", "adamw8bit"
	case near(r, 6):
		m.Optimizer = "fp32 master + 2 states per 16-bit weight (mixed Adam)"
		setup.Precision, setup.Mixed = "bf16", true
	case near(r, 4):
		m.Optimizer = "2 fp32 states per 16-bit parameter (Adam)"
		setup.Precision = "bf16"
	default:
		m.Optimizer = "no common optimizer's ratio"
	}
	if m.DType != "" && m.DType != "fp32" && setup.Precision == "fp32" {
		setup.Precision = "bf16"
	}
	size := int64(4)
	if setup.Precision != "fp32" {
		size = 2
	}
	m.ParameterCount = paramReq / size
	if frozen > 0 {
		// A frozen base's dtype is its own (often 16-bit or quantized): count
		// only the weights that train, in the dtype their state says.
		m.ParameterCount = trained / size
	}
	if e, err := estimate.Compute(estimate.Inputs{Model: estimate.Model{Params: m.ParameterCount}, Setup: setup}); err == nil {
		m.EstimatedGradientBytes, m.EstimatedOptimizerStateBytes = e.GradientsBytes, e.OptimizerStateBytes+e.MasterWeightsBytes
	}
	return m
}
