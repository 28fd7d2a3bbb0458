package whatif

import (
	"errors"
	"fmt"

	"github.com/torchmem/torchmem/analysis/estimate"
	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/result"
)

// Size is a batch size and sequence length (0: not given).
type Size struct{ Batch, Seq int64 }

// ProjectFormulas state how a measured run is projected.
var ProjectFormulas = []string{
	"projected(t) = fixed(t) + kb·ks·linear(t) + kb·ks²·attention(t) at every event t",
	"kb, ks: the batch and sequence ratios; the projected peak is the largest projected(t)",
	"fixed: weights, gradients, optimizer state, workspaces, step scratch, weight copies, rounding",
	"linear: bytes requested by the activations, temporaries and inputs of forward and backward",
	"attention: tensors with two sequence dimensions (scores, softmax, masks: ∝ seq²)",
	"attention code's per-token tensors (repeated keys and values, its output) are linear",
}

// Target checks the sizes of a projection from at to to and
// returns to with what it leaves out (zero) taken from at.
func Target(at, to Size) (Size, error) {
	if at.Batch < 0 || at.Seq < 0 || to.Batch < 0 || to.Seq < 0 {
		return to, errors.New("sizes must be positive")
	}
	if to.Batch > 0 && at.Batch == 0 || to.Seq > 0 && at.Seq == 0 {
		return to, errors.New("give the measured size of what to project (--at batch=B,seq=S)")
	}
	if to.Batch == 0 {
		to.Batch = at.Batch
	}
	if to.Seq == 0 {
		to.Seq = at.Seq
	}
	kb, ks := ratio(to.Batch, at.Batch), ratio(to.Seq, at.Seq)
	if kb*ks*ks > 1e6 || kb*ks*ks < 1e-6 {
		return to, fmt.Errorf("a projection by ×%g (batch) and ×%g (sequence) is beyond what one run can say", kb, ks)
	}
	return to, nil
}

// Project projects the measured device h (r its analysis, with a
// what-if) from size at to size to, both as Target returns them.
func Project(h *history.History, r *result.Result, at, to Size, gpu *estimate.GPU) *estimate.Result {
	kb, ks := ratio(to.Batch, at.Batch), ratio(to.Seq, at.Seq)
	c := buildCurves(h, at.Seq)
	var e *estimate.Result
	c.resolve(func() { e = c.project(r, kb, ks, at, to, gpu) })
	return e
}

// project is Project on the curves of the measured device (see
// curves.resolve), r its analysis.
func (c *curves) project(r *result.Result, kb, ks float64, at, to Size, gpu *estimate.GPU) *estimate.Result {
	measured, mj := c.peak(unit())
	base := scaled(kb, ks)
	peak, j := c.peak(base)
	w := r.WhatIf
	e := &estimate.Result{Schema: estimate.SchemaID, Source: "measurement", Plan: []estimate.Step{},
		Techniques: []estimate.Step{}, Formulas: ProjectFormulas, Notes: append([]string{}, w.Notes...)}
	e.Setup = estimate.Setup{Precision: "fp32", Optimizer: "adamw", Batch: to.Batch, Seq: to.Seq, Checkpointing: "none", World: 1}
	if w.Model.OptimizerStateBytes == 0 {
		e.Setup.Optimizer = "none"
	}
	m := w.Model
	e.ParameterCount = m.ParameterCount
	if m.GradientBytes > 0 {
		e.TrainableParameterCount = m.ParameterCount
	}
	if m.FrozenParameterBytes > 0 {
		// ParameterCount counts the trained weights only; the frozen base's
		// dtype (and so its count) is unknown.
		e.ParameterCount, e.TrainableParameterCount = 0, m.ParameterCount
	}
	if m.DType != "" && m.DType != "fp32" {
		e.Setup.Precision = "bf16"
	}
	if m.Optimizer != "" {
		e.Notes = append(e.Notes, "optimizer state: "+m.Optimizer)
	}
	if m.DType == "" {
		e.Notes = append(e.Notes, "parameter count: parameter bytes ÷ 4 (fp32 assumed; the file does not say the dtype)")
	}
	v := c.at(j)
	e.ParametersBytes = v[PartParam]
	e.GradientsBytes = v[PartGrad] + v[PartStaleGrad] + v[PartBucket]
	e.OptimizerStateBytes = v[PartOpt]
	// A KV cache grows with batch × tokens: it is part of "other" (neither
	// weights nor activations), scaled as the projection scales it.
	e.OtherBytes = v[PartFixed] + saturate(kb*ks*float64(v[PartKV]))
	lin, quad := kb*ks*float64(v[PartLinear]+v[PartLinearRest]), kb*ks*ks*float64(v[PartQuad]+v[PartQuadRest])
	act, attn := saturate(lin+quad), saturate(quad)
	e.ActivationsBytes, e.AttentionBytes = &act, &attn
	e.TotalBytes = peak
	e.PeakPhase = string(c.phaseAt(j))
	e.Phases = []estimate.PhasePeak{{Phase: e.PeakPhase, Bytes: peak, Parts: []estimate.Part{
		{Name: "parameters", Bytes: e.ParametersBytes}, {Name: "gradients", Bytes: e.GradientsBytes},
		{Name: "optimizer state", Bytes: e.OptimizerStateBytes}, {Name: "activations", Bytes: act}, {Name: "other", Bytes: e.OtherBytes}}}}
	e.Measured = &estimate.Measured{Path: r.Input.Path, FromBatch: at.Batch, FromSeq: at.Seq, ToBatch: to.Batch, ToSeq: to.Seq,
		PeakBytes: measured, PeakPhase: string(c.phaseAt(mj)), ProjectedPhase: string(c.phaseAt(j))}
	if gpu == nil && w.CapacityBytes > 0 {
		gpu = estimate.NewGPU(fmt.Sprintf("device %d", w.Device), w.CapacityBytes)
	}
	e.GPU = gpu
	oom := false
	for _, d := range r.Devices {
		oom = oom || d.Device == w.Device && d.OOM != nil
	}
	fits := func(b int64) *bool {
		// After an OOM the step did not finish: projections are lower
		// bounds, which can only show that something does not fit.
		if gpu == nil || oom && b <= gpu.UsableBytes {
			return nil
		}
		ok := b <= gpu.UsableBytes
		return &ok
	}
	e.Fits = fits(peak)
	eff := effects()
	projs, known := projectSuggestions(c, base, r.Suggestions, eff, fits)
	cost := map[string]string{}
	for _, sg := range r.Suggestions {
		cost[sg.ID] = sg.Cost
	}
	for _, p := range projs {
		if p.Method == "technique" && p.SavingBytes > 0 {
			e.Techniques = append(e.Techniques, estimate.Step{ID: p.ID, Title: p.Title, SavingBytes: p.SavingBytes, Cost: cost[p.ID], TotalBytes: p.PeakBytes})
		}
	}
	if gpu != nil && !oom {
		usable := gpu.UsableBytes
		planFits := peak <= usable
		planTotal := peak
		if !planFits {
			if comb := bestCombination(c, base, known, eff, usable); comb != nil {
				planTotal, planFits = comb.PeakBytes, comb.PeakBytes <= usable
				for i, id := range comb.IDs {
					without := []factors{base}
					for k, other := range comb.IDs {
						if k != i {
							without = append(without, eff[other].f)
						}
					}
					wo, _ := c.peak(compose(without...))
					e.Plan = append(e.Plan, estimate.Step{ID: id, Title: comb.Titles[i], SavingBytes: wo - comb.PeakBytes, Cost: cost[id], TotalBytes: comb.PeakBytes})
				}
			}
		}
		e.PlanFits, e.PlanTotalBytes = &planFits, &planTotal
	}
	if k := max(kb*ks, ks); k >= 4 {
		e.Notes = append(e.Notes, fmt.Sprintf("a ×%g projection: what the measured step did not allocate (new kernels' workspaces, a different attention backend) is not in it", k))
	}
	return e
}

func ratio(to, at int64) float64 {
	if at <= 0 {
		return 1
	}
	return float64(to) / float64(at)
}
