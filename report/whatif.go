package report

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// factorWord writes a scale factor: ×0.5, ×2.
func factorWord(k float64) string { return fmt.Sprintf("×%g", k) }

// fitsWord says whether a projection fits ("" when unknown).
func fitsWord(f *bool, w *result.WhatIf) string {
	if f == nil {
		return ""
	}
	if *f {
		return "fits " + units.FormatBytes(w.UsableBytes) + " usable"
	}
	return "over " + units.FormatBytes(w.UsableBytes) + " usable"
}

// scalingLines are the batch and sequence scalings, one line each.
func scalingLines(w *result.WhatIf) (batch, seq string) {
	var b, s []string
	for _, p := range w.Scaling {
		v := fmt.Sprintf("%s %s", factorWord(p.BatchFactor*p.SeqFactor), units.FormatBytes(p.PeakBytes))
		if p.SeqFactor == 1 {
			b = append(b, v)
		} else {
			s = append(s, fmt.Sprintf("%s %s", factorWord(p.SeqFactor), units.FormatBytes(p.PeakBytes)))
		}
	}
	return strings.Join(b, ", "), strings.Join(s, ", ")
}

// modelLines say what the measurement tells of the model.
func modelLines(w *result.WhatIf) []string {
	m := w.Model
	if m.ParameterBytes == 0 {
		return nil
	}
	dtype := m.DType
	if dtype == "" {
		dtype = "fp32 (assumed)"
	}
	size := units.FormatBytes(m.ParameterBytes)
	if t := m.ParameterTensorBytes; t > 0 && units.FormatBytes(t) != size {
		// The count divides the tensors' bytes, not the allocator's blocks.
		size = fmt.Sprintf("%s in blocks, %s of tensors", size, units.FormatBytes(t))
	}
	out := []string{fmt.Sprintf("parameters %s: %s parameters if %s", size, countWord(m.ParameterCount), dtype)}
	per := "parameters"
	if m.FrozenParameterBytes > 0 {
		out[0] = fmt.Sprintf("parameters %s: %s trained parameters if %s", size, countWord(m.ParameterCount), dtype)
		out = append(out, fmt.Sprintf("frozen base %s of them: no gradient, no optimizer state (its dtype unknown)", units.FormatBytes(m.FrozenParameterBytes)))
		per = "trained parameters"
	}
	if m.GradientBytes > 0 || m.OptimizerStateBytes > 0 {
		out = append(out, fmt.Sprintf("gradients %s (estimate %s), optimizer state %s (estimate %s)",
			units.FormatBytes(m.GradientBytes), units.FormatBytes(m.EstimatedGradientBytes),
			units.FormatBytes(m.OptimizerStateBytes), units.FormatBytes(m.EstimatedOptimizerStateBytes)))
	}
	switch {
	case m.OptimizerStateBytes > 0:
		out = append(out, fmt.Sprintf("optimizer state = %.2f × %s: %s", m.StatePerParameterByte, per, m.Optimizer))
	case m.Optimizer != "":
		out = append(out, "optimizer state: "+m.Optimizer)
	}
	if m.ActivationBytes > 0 {
		out = append(out, fmt.Sprintf("step activations up to %s, of which attention (∝ seq²) %s",
			units.FormatBytes(m.ActivationBytes), units.FormatBytes(m.AttentionBytes)))
	}
	if m.KVCacheBytes > 0 {
		out = append(out, fmt.Sprintf("KV cache up to %s, ∝ batch·seq (a cache class's; no activation technique lowers it)",
			units.FormatBytes(m.KVCacheBytes)))
	}
	return out
}

func countWord(n int64) string {
	if n >= 1e9 {
		return fmt.Sprintf("%.3gB", float64(n)/1e9)
	}
	return fmt.Sprintf("%.3gM", float64(n)/1e6)
}

// whatIfText writes the what-if section of the text output.
func whatIfText(p *printer, r *result.Result) {
	w := r.WhatIf
	if w == nil {
		return
	}
	p.f("\nwhat if (%s: peak %s = %s fixed + %s ∝ batch·seq + %s ∝ batch·seq²)\n", deviceRef(w.Device),
		units.FormatBytes(w.MeasuredPeakBytes), units.FormatBytes(w.FixedBytes), units.FormatBytes(w.LinearBytes), units.FormatBytes(w.AttentionBytes))
	for _, s := range w.Suggestions {
		p.f("  %-26s → %s (peak in %s)%s\n", units.OneLine(s.ID), units.FormatBytes(s.PeakBytes), s.Phase, projectionNote(s, w))
	}
	if c := w.Combination; c != nil && (len(c.IDs) > 1 || c.Fits != nil) {
		ids := units.OneLine(strings.Join(c.IDs, " + "))
		res := fmt.Sprintf("→ %s (peak in %s)%s", units.FormatBytes(c.PeakBytes), c.Phase, suffix(fitsWord(c.Fits, w)))
		if utf8.RuneCountInString(ids)+utf8.RuneCountInString(res) > 86 {
			p.f("  best      %s\n            %s\n", ids, res)
		} else {
			p.f("  best      %s %s\n", ids, res)
		}
	}
	b, s := scalingLines(w)
	p.f("  batch     %s\n  sequence  %s\n", b, s)
	if w.MaxBatchFactor > 0 || w.MaxSeqFactor > 0 {
		p.f("  fits %s usable up to batch %s or sequence %s\n", units.FormatBytes(w.UsableBytes), factorWord(w.MaxBatchFactor), factorWord(w.MaxSeqFactor))
	}
	for i, l := range modelLines(w) {
		head := "         "
		if i == 0 {
			head = "  model  "
		}
		p.wrap(head, "           ", units.OneLine(l))
	}
	for _, n := range w.Notes {
		p.f("  - %s\n", units.OneLine(n))
	}
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return "; " + s
}

// projectionNote says how a projection was made when not by its technique.
func projectionNote(s result.Projection, w *result.WhatIf) string {
	switch s.Method {
	case "reserved_only":
		return "; lowers reserved memory, not this"
	case "estimated_saving":
		return "; its estimated saving off the peak" + suffix(fitsWord(s.Fits, w))
	}
	return suffix(fitsWord(s.Fits, w))
}

// whatIfMarkdown writes the what-if section of the Markdown output.
func whatIfMarkdown(p *printer, r *result.Result) {
	w := r.WhatIf
	if w == nil {
		return
	}
	p.f("\n### What if\n\n")
	p.f("%s peaked at **%s**: %s fixed, %s ∝ batch·seq, %s ∝ batch·seq².\n\n", deviceSubject(w.Device),
		units.FormatBytes(w.MeasuredPeakBytes), units.FormatBytes(w.FixedBytes), units.FormatBytes(w.LinearBytes), units.FormatBytes(w.AttentionBytes))
	if len(w.Suggestions) > 0 {
		p.f("| with | projected peak | in | |\n|---|---:|---|---|\n")
		for _, s := range w.Suggestions {
			p.f("| %s | %s | %s | %s |\n", mdText(s.Title), units.FormatBytes(s.PeakBytes), s.Phase, mdText(strings.TrimPrefix(projectionNote(s, w), "; ")))
		}
		if c := w.Combination; c != nil && len(c.IDs) > 1 {
			p.f("| **%s** | **%s** | %s | %s |\n", mdText(strings.Join(c.IDs, " + ")), units.FormatBytes(c.PeakBytes), c.Phase, mdText(fitsWord(c.Fits, w)))
		}
		p.f("\n")
	}
	b, s := scalingLines(w)
	p.f("Batch %s; sequence %s.", mdText(b), mdText(s))
	if w.MaxBatchFactor > 0 || w.MaxSeqFactor > 0 {
		p.f(" Fits %s usable up to batch %s or sequence %s.", units.FormatBytes(w.UsableBytes), factorWord(w.MaxBatchFactor), factorWord(w.MaxSeqFactor))
	}
	p.f("\n")
	for i, l := range modelLines(w) {
		if i == 0 {
			p.f("\nModel, from the measurement:\n\n")
		}
		p.f("- %s\n", mdText(l))
	}
	for _, n := range w.Notes {
		p.f("\n> %s\n", mdText(n))
	}
}

// scaleRow is one line of the HTML scaling table.
type scaleRow struct{ Factor, Batch, Seq string }

// scaleRows pairs the batch and sequence scalings by factor.
func scaleRows(w *result.WhatIf) []scaleRow {
	var rows []scaleRow
	at := map[float64]int{}
	for _, p := range w.Scaling {
		k := p.BatchFactor
		if p.BatchFactor == 1 {
			k = p.SeqFactor
		}
		i, ok := at[k]
		if !ok {
			i = len(rows)
			at[k] = i
			rows = append(rows, scaleRow{Factor: factorWord(k)})
		}
		v := units.FormatBytes(p.PeakBytes) + " (" + string(p.Phase) + ")"
		if p.BatchFactor != 1 {
			rows[i].Batch = v
		} else {
			rows[i].Seq = v
		}
	}
	return rows
}
