package analysis

import (
	"errors"
	"fmt"

	"github.com/torchmem/torchmem/analysis/estimate"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
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

// Project projects the measured run of s, recorded at size at, to size to
// (a zero field keeps the measured one): the projected peak is TotalBytes
// of an estimate (schema torchmem.estimate/v1) whose parts are those at
// the projected peak. gpu, when given, is the device to fit (else the
// file's capacity, when it records one); the plan is the cheapest
// combination of the run's suggestions that fits at the projected size.
func Project(s *snapshot.Snapshot, opts Options, at, to Size, gpu *estimate.GPU) (*estimate.Result, error) {
	if at.Batch < 0 || at.Seq < 0 || to.Batch < 0 || to.Seq < 0 {
		return nil, errors.New("sizes must be positive")
	}
	if to.Batch > 0 && at.Batch == 0 || to.Seq > 0 && at.Seq == 0 {
		return nil, errors.New("give the measured size of what to project (--at batch=B,seq=S)")
	}
	if to.Batch == 0 {
		to.Batch = at.Batch
	}
	if to.Seq == 0 {
		to.Seq = at.Seq
	}
	kb, ks := ratio(to.Batch, at.Batch), ratio(to.Seq, at.Seq)
	if kb*ks*ks > 1e6 || kb*ks*ks < 1e-6 {
		return nil, fmt.Errorf("a projection by ×%g (batch) and ×%g (sequence) is beyond what one run can say", kb, ks)
	}
	opts.NoTimeline = true
	if gpu != nil {
		opts.CapacityBytes = gpu.CapacityBytes
	}
	r, h := analyze(s, opts)
	if h == nil || r.WhatIf == nil {
		return nil, errors.New("no allocation history to project (a state-only snapshot has none)")
	}
	c := buildCurves(h, at.Seq)
	var e *estimate.Result
	c.resolve(func() { e = c.project(r, kb, ks, at, to, gpu) })
	return e, nil
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
	e.ParametersBytes = v[partParam]
	e.GradientsBytes = v[partGrad] + v[partStaleGrad]
	e.OptimizerStateBytes = v[partOpt]
	// A KV cache grows with batch × tokens: it is part of "other" (neither
	// weights nor activations), scaled as the projection scales it.
	e.OtherBytes = v[partFixed] + saturate(kb*ks*float64(v[partKV]))
	lin, quad := kb*ks*float64(v[partLinear]), kb*ks*ks*float64(v[partQuad])
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
