package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
	"github.com/torchmem/torchmem/analysis/estimate"
	"github.com/torchmem/torchmem/internal/units"
)

// EstimateJSON writes an estimate as schema torchmem.estimate/v1.
func EstimateJSON(w io.Writer, r *estimate.Result) error { return writeJSON(w, r) }

// estimateRow is one line of the memory table.
type estimateRow struct {
	name  string
	bytes int64
	note  string
}

// estimateRows lists the parts of an estimate at its peak: what is live in
// the phase where the step peaks, the empty ones left out.
func estimateRows(r *estimate.Result) []estimateRow {
	if r.Measured != nil {
		return measuredRows(r)
	}
	var rows []estimateRow
	for _, pt := range peakPhase(r).Parts {
		rows = append(rows, estimateRow{pt.Name, pt.Bytes, partNote(r, pt.Name)})
	}
	if r.ActivationsBytes == nil {
		rows = append(rows, estimateRow{"activations", -1, "unknown: the architecture is not given"})
	}
	return rows
}

// peakPhase is the phase where the estimate peaks.
func peakPhase(r *estimate.Result) estimate.PhasePeak {
	for _, p := range r.Phases {
		if p.Phase == r.PeakPhase {
			return p
		}
	}
	return estimate.PhasePeak{Phase: r.PeakPhase}
}

// partNote says what a part of a phase is.
func partNote(r *estimate.Result, name string) string {
	s := r.Setup
	switch name {
	case "parameters":
		return paramNote(r)
	case "master weights":
		return "fp32 copy of the trainable weights"
	case "gradients":
		return "of the trainable parameters"
	case "optimizer state":
		note := s.Optimizer
		if s.Offload {
			note += ", offloaded to CPU"
		}
		return note
	case "step scratch":
		return "foreach AdamW: one temporary per parameter"
	case "workspaces":
		return "cuBLAS, one per thread that runs matmuls"
	case "gathered block":
		return "ZeRO-3: one block's parameters at a time"
	case "activations":
		var notes []string
		if s.Optimizer == "none" {
			notes = append(notes, "the largest working set of a forward")
		} else {
			notes = append(notes, "kept for backward")
		}
		if r.AttentionBytes != nil && *r.AttentionBytes > 0 {
			notes = append(notes, "attention (∝ seq²) "+units.FormatBytes(*r.AttentionBytes))
		}
		if r.ActivationsTextbookBytes != nil && s.Optimizer != "none" {
			notes = append(notes, "textbook "+units.FormatBytes(*r.ActivationsTextbookBytes))
		}
		if r.ActivationsFloorBytes != nil {
			notes = append(notes, "floor (guide's rule) "+units.FormatBytes(*r.ActivationsFloorBytes))
		}
		return strings.Join(notes, "; ")
	case "loss buffers":
		return "fp32 logits: log-softmax and two gradients, 12·b·s·v"
	case "autocast copies":
		return "16-bit copies of the weights, kept into backward"
	case "block", "block recompute":
		return "one block's activations and backward scratch"
	case "block copies":
		return "autocast's copies of one block's weights"
	case "checkpoints":
		return "each block's input"
	case "head gradients":
		return "the first gradients backward makes"
	case "KV cache":
		return "2 × layers × batch × KV heads × head_dim × tokens"
	case "working set":
		if s.NewTokens > 0 {
			return "the prompt's forward (a block, or the last logits)"
		}
		return "a block's, or the head's logits"
	}
	return ""
}

// otherPhases says the estimate of the phases other than the peak's.
func otherPhases(r *estimate.Result) []string {
	var out []string
	for _, p := range r.Phases {
		if p.Phase != r.PeakPhase {
			out = append(out, fmt.Sprintf("%s %s", p.Phase, units.FormatBytes(p.Bytes)))
		}
	}
	return out
}

// measuredRows are the parts of a projected measurement at its peak.
func measuredRows(r *estimate.Result) []estimateRow {
	act := "measured, scaled to the new size"
	if r.AttentionBytes != nil && *r.AttentionBytes > 0 {
		act += "; attention (∝ seq²) " + units.FormatBytes(*r.AttentionBytes)
	}
	rows := []estimateRow{
		{"parameters", r.ParametersBytes, "measured"},
		{"gradients", r.GradientsBytes, "measured, live at the projected peak"},
		{"optimizer state", r.OptimizerStateBytes, "measured, live at the projected peak"},
		{"activations", -1, act},
	}
	if r.ActivationsBytes != nil {
		rows[3].bytes = *r.ActivationsBytes
	}
	if r.OtherBytes > 0 {
		rows = append(rows, estimateRow{"other", r.OtherBytes, "workspaces, step scratch, weight copies, rounding, unknown"})
	}
	return rows
}

func paramNote(r *estimate.Result) string {
	n := humanize.Comma(r.ParameterCount)
	if r.Setup.LoRARank > 0 {
		return fmt.Sprintf("%s frozen (%s) + %s adapter parameters (fp32)", n, r.Setup.Precision, humanize.Comma(r.TrainableParameterCount))
	}
	return fmt.Sprintf("%s × %s", n, r.Setup.Precision)
}

// setupLine says how the model is trained, in words.
func setupLine(s estimate.Setup) string { return strings.Join(setupParts(s), ", ") }

// setupParts are the pieces of setupLine.
func setupParts(s estimate.Setup) []string {
	var parts []string
	prec := s.Precision
	switch {
	case s.AMP:
		prec = "PyTorch AMP (fp32 weights, bf16 autocast)"
	case s.Mixed:
		prec += " weights, fp32 master weights (DeepSpeed/Megatron mixed precision)"
	}
	if s.LoRARank > 0 {
		prec = fmt.Sprintf("LoRA r=%d on a %s base", s.LoRARank, s.Precision)
		if s.Precision == "int4" {
			prec = fmt.Sprintf("QLoRA r=%d on a 4-bit base", s.LoRARank)
		}
	}
	parts = append(parts, prec)
	if s.Optimizer == "none" {
		parts = append(parts, "inference (no optimizer)")
	} else {
		parts = append(parts, s.Optimizer)
	}
	parts = append(parts, fmt.Sprintf("batch %d × sequence %d", s.Batch, s.Seq))
	if s.Optimizer != "none" {
		parts = append(parts, map[string]string{"none": "no recomputation", "selective": "selective recomputation", "full": "full activation checkpointing"}[s.Checkpointing])
	}
	if s.Attention != "" {
		parts = append(parts, map[string]string{"sdpa": "SDPA attention", "eager": "eager attention", "flash": "FlashAttention"}[s.Attention])
	}
	if s.NewTokens > 0 {
		parts = append(parts, fmt.Sprintf("%s generated", plural(int(s.NewTokens), "new token")))
		if s.StaticCache {
			parts = append(parts, "static KV cache")
		}
	}
	if s.ZeRO > 0 {
		parts = append(parts, fmt.Sprintf("ZeRO-%d", s.ZeRO))
	}
	parts = append(parts, plural(int(s.World), "GPU"))
	return parts
}

// wrapJoin joins parts with ", ", starting a new line before width columns.
func wrapJoin(parts []string, width int) string {
	var b strings.Builder
	line := 0
	for i, p := range parts {
		n := utf8.RuneCountInString(p)
		if i > 0 {
			if line+2+n > width {
				b.WriteString(",\n")
				line = 0
			} else {
				b.WriteString(", ")
				line += 2
			}
		}
		b.WriteString(p)
		line += n
	}
	return b.String()
}

// sourceLine names where the model's facts come from.
func sourceLine(r *estimate.Result) string {
	switch a := r.Architecture; {
	case r.Measured != nil:
		return "projection of " + units.OneLine(r.Measured.Path)
	case a != nil && a.Source != "" && a.Source != "flags":
		return fmt.Sprintf("%s (%s)", units.OneLine(a.Source), units.OneLine(a.Name))
	case a != nil:
		return "a transformer from its dimensions"
	}
	return "a model of a given size"
}

// countLine says the model's size.
func countLine(r *estimate.Result) string {
	n := fmt.Sprintf("%s parameters (%s)", humanize.Comma(r.ParameterCount), shortCount(r.ParameterCount))
	switch {
	case r.Measured != nil && r.ParameterCount == 0 && r.TrainableParameterCount > 0:
		n = fmt.Sprintf("%s trained parameters if %s (%s), beside a frozen base of unknown dtype", humanize.Comma(r.TrainableParameterCount), r.Setup.Precision, shortCount(r.TrainableParameterCount))
	case r.Measured != nil && r.ParameterCount == 0:
		n = "parameters: none recorded as such"
	case r.Measured != nil:
		n = fmt.Sprintf("%s parameters if %s (%s)", humanize.Comma(r.ParameterCount), r.Setup.Precision, shortCount(r.ParameterCount))
	}
	if a := r.Architecture; a != nil && r.Measured == nil && a.Layers > 0 {
		n += fmt.Sprintf(": %d layers, hidden %d, %d heads (%d KV), MLP %d, vocab %d", a.Layers, a.Hidden, a.Heads, a.KVHeads, a.FFN, a.Vocab)
	}
	return n
}

// shortCount writes a parameter count as models are named: 6.74B, 124M.
func shortCount(n int64) string {
	switch {
	case n >= 1e12:
		return fmt.Sprintf("%.3gT", float64(n)/1e12)
	case n >= 1e9:
		return fmt.Sprintf("%.3gB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.3gM", float64(n)/1e6)
	}
	return fmt.Sprintf("%.3gK", float64(n)/1e3)
}

// measuredLine says what was measured and what it is projected to.
func measuredLine(m *estimate.Measured) string {
	return fmt.Sprintf("measured at %s: peak %s in %s; projected to %s",
		sizeWords(m.FromBatch, m.FromSeq), units.FormatBytes(m.PeakBytes), m.PeakPhase, sizeWords(m.ToBatch, m.ToSeq))
}

// sizeWords writes a batch and sequence, leaving out what was not given.
func sizeWords(batch, seq int64) string {
	var parts []string
	if batch > 0 {
		parts = append(parts, fmt.Sprintf("batch %d", batch))
	}
	if seq > 0 {
		parts = append(parts, fmt.Sprintf("sequence %d", seq))
	}
	return strings.Join(parts, " × ")
}

// fitLine says whether the total fits the GPU.
func fitLine(r *estimate.Result) string {
	g := r.GPU
	head := fmt.Sprintf("GPU %s (%s, %s usable)", units.OneLine(g.Name), units.FormatBytes(g.CapacityBytes), units.FormatBytes(g.UsableBytes))

	switch {
	case r.Fits == nil && r.Measured != nil:
		return head + ": unknown, the measured step did not finish (OOM)"
	case r.Fits == nil:
		return head + ": unknown without the activations"
	case *r.Fits:
		return fmt.Sprintf("%s: fits, %s to spare", head, units.FormatBytes(g.UsableBytes-r.TotalBytes))
	}
	return fmt.Sprintf("%s: does not fit, %s over", head, units.FormatBytes(r.TotalBytes-g.UsableBytes))
}

// EstimateText writes an estimate for a terminal (lines within 100 columns).
func EstimateText(w io.Writer, r *estimate.Result) error {
	p := &printer{w: w}
	p.f("torchmem estimate — %s\n%s\n", sourceLine(r), countLine(r))
	if m := r.Measured; m != nil {
		p.f("%s\n", measuredLine(m))
	} else {
		p.f("%s\n", wrapJoin(setupParts(r.Setup), 100))
	}
	p.f("\n")
	for _, row := range estimateRows(r) {
		b := "—"
		if row.bytes >= 0 {
			b = units.FormatBytes(row.bytes)
		}
		p.f("  %-16s %10s  %s\n", row.name, b, row.note)
	}
	total := "per GPU"
	switch {
	case r.Measured != nil:
		total = "projected peak, in " + r.Measured.ProjectedPhase
	case r.PeakPhase != "":
		total = "peak per GPU, in " + r.PeakPhase
	}
	p.f("  %-16s %10s  %s\n", "total", units.FormatBytes(r.TotalBytes), total)
	if o := otherPhases(r); len(o) > 0 {
		p.f("  other phases: %s\n", wrapJoin(o, 80))
	}
	if r.GPU != nil {
		p.f("\n%s\n", fitLine(r))
		if g := r.GPU; g.UsableReason != "" {
			p.f("  usable: %s\n", units.OneLine(g.UsableReason))
		}
		if r.Fits != nil && !*r.Fits && r.PlanTotalBytes != nil {
			if *r.PlanFits {
				p.f("cheapest plan that fits: %s\n", units.FormatBytes(*r.PlanTotalBytes))
			} else {
				p.f("nothing here makes it fit; the most any plan saves leaves %s\n", units.FormatBytes(*r.PlanTotalBytes))
			}
			for _, st := range r.Plan {
				p.f("  + %s — saves %s\n      cost: %s\n", st.Title, units.FormatBytes(st.SavingBytes), st.Cost)
			}
		}
	}
	if len(r.Techniques) > 0 {
		p.f("\neach technique alone\n")
		for _, st := range r.Techniques {
			p.f("  %s: %s (saves %s)\n      cost: %s\n", st.Title, units.FormatBytes(st.TotalBytes), units.FormatBytes(st.SavingBytes), st.Cost)
		}
	}
	p.f("\nformulas\n")
	for _, f := range r.Formulas {
		p.f("  %s\n", f)
	}
	if len(r.Notes) > 0 {
		p.f("\nnotes\n")
		for _, n := range r.Notes {
			p.wrap("  - ", "    ", units.OneLine(n))
		}
	}
	return p.err
}

// EstimateMarkdown writes an estimate for a ticket or a README.
func EstimateMarkdown(w io.Writer, r *estimate.Result) error {
	p := &printer{w: w}
	p.f("## torchmem estimate: %s\n\n%s\n\n", mdText(sourceLine(r)), mdText(countLine(r)))
	if m := r.Measured; m != nil {
		p.f("%s\n\n", mdText(measuredLine(m)))
	} else {
		p.f("%s\n\n", mdText(setupLine(r.Setup)))
	}
	p.f("| part | bytes | |\n|---|---:|---|\n")
	for _, row := range estimateRows(r) {
		b := "—"
		if row.bytes >= 0 {
			b = units.FormatBytes(row.bytes)
		}
		p.f("| %s | %s | %s |\n", row.name, b, mdText(row.note))
	}
	peakWord := ""
	if r.Measured == nil && r.PeakPhase != "" {
		peakWord = "peak, in " + r.PeakPhase
	}
	p.f("| **total** | **%s** | %s |\n", units.FormatBytes(r.TotalBytes), mdText(peakWord))
	if o := otherPhases(r); len(o) > 0 {
		p.f("\nOther phases: %s\n", mdText(strings.Join(o, ", ")))
	}
	if r.GPU != nil {
		p.f("\n**%s**\n", mdText(fitLine(r)))
		if g := r.GPU; g.UsableReason != "" {
			p.f("\nUsable: %s\n", mdText(g.UsableReason))
		}
		if r.Fits != nil && !*r.Fits && r.PlanTotalBytes != nil {
			word := "Cheapest plan that fits"
			if !*r.PlanFits {
				word = "Nothing here makes it fit; the best plan"
			}
			p.f("\n%s: %s\n\n", word, units.FormatBytes(*r.PlanTotalBytes))
			for _, st := range r.Plan {
				p.f("- %s — saves %s; cost: %s\n", mdText(st.Title), units.FormatBytes(st.SavingBytes), mdText(st.Cost))
			}
		}
	}
	if len(r.Techniques) > 0 {
		p.f("\n| technique alone | total | saves | cost |\n|---|---:|---:|---|\n")
		for _, st := range r.Techniques {
			p.f("| %s | %s | %s | %s |\n", mdText(st.Title), units.FormatBytes(st.TotalBytes), units.FormatBytes(st.SavingBytes), mdText(st.Cost))
		}
	}
	p.f("\n<details><summary>Formulas</summary>\n\n")
	for _, f := range r.Formulas {
		p.f("- %s\n", mdText(f))
	}
	p.f("\n</details>\n")
	for i, n := range r.Notes {
		if i == 0 {
			p.f("\nNotes:\n\n")
		}
		p.f("- %s\n", mdText(n))
	}
	return p.err
}
