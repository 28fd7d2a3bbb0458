package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/rollup"
)

// MaxListedRanks is how many rows of the table of ranks text and Markdown
// list; beyond it they list those that matter (the worst, OOMs, outliers,
// leaks) and count the rest (--format json has them all).
const MaxListedRanks = 64

// RollupText writes the roll-up for a terminal — the headline, the table of
// ranks, outliers, common sites and notes — then each result of details in
// full, as TextTop writes it with top sites.
func RollupText(w io.Writer, ru *rollup.Rollup, details []rollup.Detail, top int) error {
	p := &printer{w: w}
	p.wrap("", "", rollupHeadline(ru))
	if f := ru.FirstOOM; f != nil {
		p.wrap("first OOM: ", "  ", fmt.Sprintf("rank %d %s: %s requested with %s free, %s at %s",
			f.Rank, deviceName(f.Device, firstOOMKind(ru)), units.FormatBytes(f.RequestedBytes), units.FormatBytes(f.DeviceFreeBytes),
			phaseAt(f.Phase, f.Step), units.OneLine(f.Site)))
	}
	if lines, more := unreadableLines(ru); len(lines) > 0 {
		p.wrap("", "", unreadableHead(ru))
		for _, l := range lines {
			p.wrap("  ", "    ", l)
		}
		if more > 0 {
			p.f("  … %d more (every one: --format json)\n", more)
		}
	}
	if len(ru.Ranks) > 0 {
		rows, more := rowsOfInterest(ru, MaxListedRanks)
		p.f("\n%6s %-8s %9s  %-16s %-24s %-18s %s\n", "rank", "device", "peak", "peak in", "largest at peak", "OOM request", "leak/step")
		for _, r := range rows {
			oom, leak := "", ""
			if r.OOM != nil {
				oom = units.FormatBytes(r.OOM.RequestedBytes) + " " + string(r.OOM.Phase)
			}
			if len(r.Leaks) > 0 {
				leak = units.FormatBytes(r.Leaks[0].BytesPerStep)
			}
			largest := fmt.Sprintf("%s %s", r.Largest.Category, units.FormatBytes(r.Largest.Bytes))
			p.f("%6d %-8s %9s  %-16s %-24s %-18s %s\n", r.Rank, units.ClipRunes(deviceName(r.Device, r.Kind), 8), units.FormatBytes(r.PeakBytes),
				units.ClipRunes(phaseStep(r.PeakPhase, r.PeakStep), 16), units.ClipRunes(largest, 24), units.ClipRunes(oom, 18), leak)
		}
		if more > 0 {
			p.f("%6s %s more (every row: --format json)\n", "…", plural(more, "device"))
		}
	}
	if lines, more := sameProcessLines(ru); len(lines) > 0 {
		p.f("\nother files of the same processes (no ranks of their own)\n")
		for _, l := range lines {
			p.wrap("  ", "    ", l)
		}
		if more > 0 {
			p.f("  … %d more (every one: --format json)\n", more)
		}
	}
	if len(ru.Outliers) > 0 {
		p.f("\noutliers\n")
		for _, o := range ru.Outliers {
			p.wrap("  ", "    ", fmt.Sprintf("%s: %s", rowName(o.Rank, o.Device, rowKind(ru, o.Input, o.Device)), outlierText(o)))
		}
		if ru.OutliersMore > 0 {
			p.f("  … %s\n", moreOutliers(ru.OutliersMore))
		}
	}
	if len(ru.CommonSites) > 0 {
		p.f("\nsites among the three largest on most ranks\n")
		for _, s := range ru.CommonSites {
			p.f("  %5d/%-5d %-16s median %9s  max %9s  %s\n", s.Ranks, len(ru.Ranks), s.Category, units.FormatBytes(s.MedianBytes),
				units.FormatBytes(s.MaxBytes), units.ClipRunes(units.OneLine(s.Site), 38))
		}
	}
	if len(ru.Notes) > 0 {
		p.f("\nnotes\n")
		for _, n := range ru.Notes {
			p.wrap("  - ", "    ", units.OneLine(n))
		}
	}
	for _, d := range details {
		rank, _ := rollup.Identify(d.Result.Input, d.Input)
		p.f("\n%s\n", units.ClipRunes(fmt.Sprintf("── rank %d ── %s ", rank, units.OneLine(d.Result.Input.Path))+strings.Repeat("─", TextWidth), TextWidth))
		if p.err == nil {
			p.err = TextTop(w, d.Result, top)
		}
	}
	return p.err
}

// RollupMarkdown writes the roll-up for a bug ticket, then each result of
// details in full, as Markdown writes it.
func RollupMarkdown(w io.Writer, ru *rollup.Rollup, details []rollup.Detail) error {
	p := &printer{w: w}
	p.f("## torchmem roll-up: %s\n\n", plural(ru.Inputs, "input"))
	p.f("**%s**\n\n", mdText(rollupHeadline(ru)))
	if f := ru.FirstOOM; f != nil {
		p.f("> **First OOM**: rank %d `%s`: requested **%s** with **%s** free, %s at `%s`.\n\n", f.Rank, deviceName(f.Device, firstOOMKind(ru)),
			units.FormatBytes(f.RequestedBytes), units.FormatBytes(f.DeviceFreeBytes), mdText(phaseAt(f.Phase, f.Step)), mdCode(f.Site))
	}
	if lines, more := unreadableLines(ru); len(lines) > 0 {
		p.f("> **%s**\n>\n", mdText(unreadableHead(ru)))
		for _, l := range lines {
			p.f("> - %s\n", mdText(l))
		}
		if more > 0 {
			p.f("> - … %d more (every one: `--format json`)\n", more)
		}
		p.f("\n")
	}
	if len(ru.Ranks) > 0 {
		rows, more := rowsOfInterest(ru, MaxListedRanks)
		p.f("| rank | device | peak | peak in | largest at peak | OOM | leak/step | file |\n|---:|---|---:|---|---|---|---:|---|\n")
		for _, r := range rows {
			oom, leak := "", ""
			if o := r.OOM; o != nil {
				oom = fmt.Sprintf("%s requested, %s free, %s at `%s`", units.FormatBytes(o.RequestedBytes), units.FormatBytes(o.DeviceFreeBytes), mdText(phaseAt(o.Phase, o.Step)), mdCode(o.Site))
			}
			if len(r.Leaks) > 0 {
				leak = fmt.Sprintf("%s %s", units.FormatBytes(r.Leaks[0].BytesPerStep), mdText(r.Leaks[0].Kind))
			}
			p.f("| %d | %s | %s | %s | %s %s | %s | %s | `%s` |\n", r.Rank, mdText(deviceName(r.Device, r.Kind)), units.FormatBytes(r.PeakBytes),
				mdText(phaseStep(r.PeakPhase, r.PeakStep)), r.Largest.Category, units.FormatBytes(r.Largest.Bytes), oom, leak, mdCode(r.Path))
		}
		if more > 0 {
			p.f("\n%s more (every row: `--format json`).\n", plural(more, "device"))
		}
	}
	if lines, more := sameProcessLines(ru); len(lines) > 0 {
		p.f("\n### Other files of the same processes\n\n")
		for _, l := range lines {
			p.f("- %s\n", mdText(l))
		}
		if more > 0 {
			p.f("- … %d more (every one: `--format json`)\n", more)
		}
	}
	if len(ru.Outliers) > 0 {
		p.f("\n### Outliers\n\n")
		for _, o := range ru.Outliers {
			p.f("- **%s**: %s\n", mdText(rowName(o.Rank, o.Device, rowKind(ru, o.Input, o.Device))), mdText(outlierText(o)))
		}
		if ru.OutliersMore > 0 {
			p.f("- … %s\n", moreOutliers(ru.OutliersMore))
		}
	}
	if len(ru.CommonSites) > 0 {
		p.f("\n### Sites among the three largest on most ranks\n\n| site | category | ranks | median | max |\n|---|---|---:|---:|---:|\n")
		for _, s := range ru.CommonSites {
			p.f("| `%s` | %s | %d of %d | %s | %s |\n", mdCode(s.Site), s.Category, s.Ranks, len(ru.Ranks), units.FormatBytes(s.MedianBytes), units.FormatBytes(s.MaxBytes))
		}
	}
	if len(ru.Notes) > 0 {
		p.f("\n")
		for _, n := range ru.Notes {
			p.f("- %s\n", mdText(n))
		}
	}
	for _, d := range details {
		rank, _ := rollup.Identify(d.Result.Input, d.Input)
		p.f("\n<details><summary>Rank %d: <code>%s</code></summary>\n\n", rank, mdText(d.Result.Input.Path))
		if p.err == nil {
			p.err = Markdown(w, d.Result)
		}
		p.f("\n</details>\n")
	}
	return p.err
}

// phaseStep is "backward 3", "forward", or "unknown".
func phaseStep(p result.Phase, step int) string {
	if p == "" {
		p = result.PhaseUnknown
	}
	if step > 0 {
		return fmt.Sprintf("%s %d", p, step)
	}
	return string(p)
}

// rowKind is the device kind of a row.
func rowKind(ru *rollup.Rollup, input, device int) string {
	for _, r := range ru.Ranks {
		if r.Input == input && r.Device == device {
			return r.Kind
		}
	}
	return ""
}
