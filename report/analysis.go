package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// JSON writes results as schema torchmem.analysis/v1 (one object, or an
// array for several inputs), with exact byte counts.
func JSON(w io.Writer, results []*result.Result) error {
	return writeJSON(w, oneOrMany(results))
}

// Text writes what filled memory, for a terminal, on about one screen:
// every line fits TextWidth columns (long ones wrap with an indent).
func Text(w io.Writer, r *result.Result) error {
	return TextTop(w, r, 5)
}

// TextTop is Text listing at most top allocation sites per device.
func TextTop(w io.Writer, r *result.Result, top int) error {
	p := &printer{w: w}
	p.wrap("", "  ", fmt.Sprintf("%s — %s, %s", units.OneLine(r.Input.Path), r.Input.Format, units.OneLine(r.Input.Generation)))
	p.wrap("", "", units.OneLine(Headline(r)))
	const tab = "           " // the indent of a wrapped device line
	for _, d := range r.Devices {
		p.f("\n%s\n", deviceTitle(d))
		if d.OOM != nil {
			o := d.OOM
			if d.Device != headlineOOMDevice(r) { // another device's OOM: its own verdict
				p.wrap("  OOM      ", tab, units.OneLine(o.Verdict))
			}
			p.wrap("  OOM      ", tab, fmt.Sprintf("requested %s, device free %s, allocated %s%s, in %s%s at %s",
				units.FormatBytes(o.RequestedBytes), units.FormatBytes(o.DeviceFreeBytes), units.FormatBytes(o.AllocatedBytes),
				reservedAfter(", reserved ", o.ReservedBytes, o.ReservedUnknown), o.Phase, stepNote(" (step %d)", o.Step), units.OneLine(o.Site)))
			fr := o.Fragmentation
			p.wrap(tab, tab, fmt.Sprintf("cached free %s, largest free block %s, expandable segments %v",
				units.FormatBytes(fr.CachedFreeBytes), units.FormatBytes(fr.LargestFreeBlockBytes), fr.ExpandableSegments))
		}
		if d.NoHistory {
			p.wrap("  dump     ", tab, dumpState(d))
			if c := cachedNote(d.AtEnd.Fragmentation); c != "" {
				p.wrap("  cached   ", tab, c)
			}
		} else {
			p.wrap("  peak     ", tab, fmt.Sprintf("%s allocated%s in %s%s%s", units.FormatBytes(d.Peak.AllocatedBytes),
				reservedAfter(" (reserved ", d.Peak.ReservedBytes, d.Peak.ReservedUnknown, ")"), d.Peak.Phase, stepNote(", step %d", d.Peak.Step), eventNote(d.Peak.EventIndex)))
			p.f("  end      %s allocated%s\n", units.FormatBytes(d.AtEnd.AllocatedBytes), reservedAfter(", ", d.AtEnd.ReservedBytes, d.AtEnd.ReservedUnknown, " reserved"))
		}
		p.f("%s\n", strings.TrimRight(fmt.Sprintf("  %-20s %12s %12s %12s", "category", "at peak", "at end", oomHeader(d)), " "))
		for c := result.Category(0); c < result.NumCategories; c++ {
			if d.Peak.Categories[c] == 0 && d.AtEnd.Categories[c] == 0 && (d.OOM == nil || d.OOM.Categories[c] == 0) {
				continue
			}
			oom := ""
			if d.OOM != nil {
				oom = units.FormatBytes(d.OOM.Categories[c])
			}
			p.f("%s\n", strings.TrimRight(fmt.Sprintf("  %-20s %12s %12s %12s", c, units.FormatBytes(d.Peak.Categories[c]),
				units.FormatBytes(d.AtEnd.Categories[c]), oom), " "))
		}
		if len(d.TopSites) > 0 {
			p.f("  top sites\n")
			for _, s := range firstN(d.TopSites, top) {
				p.wrap(fmt.Sprintf("    %10s  %-16s ", units.FormatBytes(s.Bytes), s.Category), strings.Repeat(" ", 33),
					fmt.Sprintf("%s (%s)", units.OneLine(s.Site), plural(s.Count, "block")))
			}
			if more := len(d.TopSites) - top; more > 0 {
				p.f("    … %d more %s (--top %d lists them)\n", more, map[bool]string{true: "site", false: "sites"}[more == 1], len(d.TopSites))
			}
		}
		if ph := phasePeaks(d.Phases); ph != "" {
			p.wrap("  phases   ", tab, ph)
		}
	}
	textLeaks(p, r)
	if len(r.Suggestions) > 0 {
		p.f("\nsuggestions (by estimated saving)\n")
		for i, s := range r.Suggestions {
			n := fmt.Sprintf("  %d. ", i+1)
			indent := strings.Repeat(" ", len(n))
			p.wrap(n, indent, fmt.Sprintf("%s — saves ~%s (%s)", units.OneLine(s.Title), units.FormatBytes(s.EstimatedSavingsBytes), units.OneLine(s.Cost)))
			p.wrap(indent+"because ", indent+"  ", units.OneLine(s.Because))
		}
	}
	whatIfText(p, r)
	if len(r.Diagnostics) > 0 {
		p.f("\nnotes\n")
		for _, d := range r.Diagnostics {
			p.wrap("  - ", "    ", units.OneLine(d.Message))
		}
	}
	return p.err
}

// headlineOOMDevice is the device whose OOM verdict is the headline (−1: none).
func headlineOOMDevice(r *result.Result) int {
	for _, d := range r.Devices {
		if d.OOM != nil && d.OOM.Verdict != "" {
			return d.Device
		}
	}
	return -1
}

// Headline is the one sentence a report starts with: the OOM verdict (with
// its device when the file has several), else the peak and what filled it.
func Headline(r *result.Result) string {
	if dev := headlineOOMDevice(r); dev >= 0 {
		for _, d := range r.Devices {
			if d.Device == dev {
				if len(r.Devices) > 1 {
					return fmt.Sprintf("Device %d: %s", dev, d.OOM.Verdict)
				}
				return d.OOM.Verdict
			}
		}
	}
	// The device with the highest peak; host memory (a chrome trace's CPU)
	// only when it is all there is.
	var best *result.DeviceResult
	for i := range r.Devices {
		d := &r.Devices[i]
		switch host, bestHost := d.Kind == string(snapshot.DeviceCPU), best != nil && best.Kind == string(snapshot.DeviceCPU); {
		case best == nil, bestHost && !host, host == bestHost && d.Peak.AllocatedBytes > best.Peak.AllocatedBytes:
			best = d
		}
	}
	if best == nil {
		return "No device memory in this file."
	}
	name := fmt.Sprintf("Device %d", best.Device)
	if best.Kind == string(snapshot.DeviceCPU) {
		name = "Host memory (cpu)"
	}
	top, share := dominant(best.Peak.Categories)
	if best.Peak.AllocatedBytes == 0 {
		return name + ": no allocations recorded."
	}
	if best.NoHistory {
		return fmt.Sprintf("%s at the dump (no allocation history): %s; %s was the largest part (%.0f%%).",
			name, dumpState(*best), top, share*100)
	}
	return fmt.Sprintf("%s peaked at %s allocated in %s; %s was the largest part (%.0f%%).",
		name, units.FormatBytes(best.Peak.AllocatedBytes), best.Peak.Phase, top, share*100)
}

// dumpState says what a device without history holds at the dump.
func dumpState(d result.DeviceResult) string {
	return fmt.Sprintf("%s allocated%s", units.FormatBytes(d.AtEnd.AllocatedBytes),
		reservedAfter(", ", d.AtEnd.ReservedBytes, d.AtEnd.ReservedUnknown, " reserved"))
}

// cachedNote says what the allocator caches at the dump: the free bytes,
// in how many blocks, the largest, and which requests fail for
// fragmentation ("" without segment state or cache).
func cachedNote(fr *result.Fragmentation) string {
	if fr == nil || fr.CachedFreeBytes == 0 {
		return ""
	}
	note := fmt.Sprintf("%s free in %s, the largest %s", units.FormatBytes(fr.CachedFreeBytes),
		plural(fr.FreeBlocks, "block"), units.FormatBytes(fr.LargestFreeBlockBytes))
	if fr.LargestFreeBlockBytes < fr.CachedFreeBytes && !fr.ExpandableSegments {
		note += fmt.Sprintf("; a request above %s cannot use the cache: it needs a new segment, and fails for fragmentation when the device has no room for one (expandable_segments:True avoids that)",
			units.FormatBytes(fr.LargestFreeBlockBytes))
	}
	return note
}

func dominant(c result.Categories) (result.Category, float64) {
	best := result.Unknown
	var bv int64 = -1
	for i, v := range c {
		if v > bv {
			best, bv = result.Category(i), v
		}
	}
	t := c.Total()
	if t == 0 {
		return best, 0
	}
	return best, float64(bv) / float64(t)
}

// reservedAfter renders a reserved figure between before and after
// (before+size+after), or "" when the file states none: a reserved figure
// of 0 that the file never gave would be a guess.
func reservedAfter(before string, v int64, unknown bool, after ...string) string {
	if unknown {
		return ""
	}
	return before + units.FormatBytes(v) + strings.Join(after, "")
}

// stepNote renders a step with format ("(step %d)"), or "" outside steps
// (step 0 or below: before the first step, or no steps told apart).
func stepNote(format string, step int) string {
	if step <= 0 {
		return ""
	}
	return fmt.Sprintf(format, step)
}

// eventNote names the event of a peak (", event 433"), or "" for the state
// before the first event (a dump without history).
func eventNote(i int) string {
	if i < 0 {
		return ""
	}
	return fmt.Sprintf(", event %d", i)
}

// deviceRef names a device in a sentence: "device 1", or "the cpu (host
// memory)" for a chrome trace's host allocations (device −1, no ordinal).
func deviceRef(id int) string {
	if id < 0 {
		return "the cpu (host memory)"
	}
	return fmt.Sprintf("device %d", id)
}

// deviceSubject is deviceRef starting a sentence: "Device 1", "Host memory
// (cpu)".
func deviceSubject(id int) string {
	if id < 0 {
		return "Host memory (cpu)"
	}
	return fmt.Sprintf("Device %d", id)
}

func deviceTitle(d result.DeviceResult) string {
	t := "device " + result.DeviceName(d.Kind, d.Device)
	if d.Capacity > 0 {
		t += " (" + units.FormatBytes(d.Capacity) + ")"
	}
	return t
}

func oomHeader(d result.DeviceResult) string {
	if d.OOM != nil {
		return "at OOM"
	}
	return ""
}

func firstN[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%s %ss", units.Count(n), word)
}

// phasePeaks summarises the highest peak of each phase over all steps.
func phasePeaks(spans []result.PhaseSpan) string {
	peak := map[result.Phase]int64{}
	var order []result.Phase
	for _, s := range spans {
		if _, ok := peak[s.Phase]; !ok {
			order = append(order, s.Phase)
		}
		peak[s.Phase] = max(peak[s.Phase], s.PeakAllocatedBytes)
	}
	var parts []string
	for _, ph := range order {
		parts = append(parts, fmt.Sprintf("%s %s", ph, units.FormatBytes(peak[ph])))
	}
	return strings.Join(parts, ", ")
}

// Markdown writes a report for a bug ticket: headline (the OOM verdict, said
// once), each device's OOM facts with the failed request's stack folded,
// categories, the peak of each phase, top sites, leaks, suggestions with
// their code folded, and notes.
func Markdown(w io.Writer, r *result.Result) error {
	p := &printer{w: w}
	p.f("## torchmem: `%s`\n\n", mdCode(FileName(r.Input.Path)))
	p.f("**%s**\n\n", mdText(Headline(r)))
	p.f("Input: %s, generation %s, %s; recorded: %s.\n", r.Input.Format, mdText(r.Input.Generation), units.FormatBytes(r.Input.Bytes), mdText(r.Input.Recording))
	for _, d := range r.Devices {
		p.f("\n### %s\n\n", deviceTitle(d))
		if o := d.OOM; o != nil {
			if d.Device != headlineOOMDevice(r) { // the headline says the first OOM's verdict
				p.f("> **Out of memory**: %s\n>\n", mdText(o.Verdict))
			}
			p.f("> OOM facts: requested %s with %s free on the device; allocated %s%s; cached free %s, largest free block %s%s.\n\n",
				units.FormatBytes(o.RequestedBytes), units.FormatBytes(o.DeviceFreeBytes), units.FormatBytes(o.AllocatedBytes), reservedAfter(", reserved ", o.ReservedBytes, o.ReservedUnknown),
				units.FormatBytes(o.Fragmentation.CachedFreeBytes), units.FormatBytes(o.Fragmentation.LargestFreeBlockBytes), fragNote(o.Fragmentation))
			if len(o.Stack) > 0 {
				p.f("<details><summary>Stack of the failed %s request (%s, innermost first)</summary>\n\n```\n", units.FormatBytes(o.RequestedBytes), plural(len(o.Stack), "frame"))
				for _, fr := range o.Stack {
					p.f("%s\n", mdFenced(fr))
				}
				p.f("```\n\n</details>\n\n")
			}
		}
		if d.NoHistory {
			p.f("At the dump (no allocation history): %s.", dumpState(d))
			if c := cachedNote(d.AtEnd.Fragmentation); c != "" {
				p.f(" Cached: %s.", c)
			}
			p.f("\n\n")
		} else {
			p.f("Peak **%s** allocated%s in `%s`%s. At the end: %s allocated%s.\n\n",
				units.FormatBytes(d.Peak.AllocatedBytes), reservedAfter(" (reserved ", d.Peak.ReservedBytes, d.Peak.ReservedUnknown, ")"), d.Peak.Phase, stepNote(", step %d", d.Peak.Step),
				units.FormatBytes(d.AtEnd.AllocatedBytes), reservedAfter(", ", d.AtEnd.ReservedBytes, d.AtEnd.ReservedUnknown, " reserved"))
		}
		head := "| category | at peak | at end |"
		sep := "|---|---:|---:|"
		if d.OOM != nil {
			head += " at OOM |"
			sep += "---:|"
		}
		p.f("%s\n%s\n", head, sep)
		for c := result.Category(0); c < result.NumCategories; c++ {
			row := fmt.Sprintf("| %s | %s | %s |", c, units.FormatBytes(d.Peak.Categories[c]), units.FormatBytes(d.AtEnd.Categories[c]))
			if d.OOM != nil {
				row += " " + units.FormatBytes(d.OOM.Categories[c]) + " |"
			}
			p.f("%s\n", row)
		}
		if len(d.PhasePeaks) > 0 {
			p.f("\n| phase | highest peak | step | largest part |\n|---|---:|---:|---|\n")
			for _, pp := range d.PhasePeaks {
				top, share := dominant(pp.Categories)
				part := "–"
				if pp.AllocatedBytes > 0 {
					part = fmt.Sprintf("%s %s (%.0f%%)", top, units.FormatBytes(pp.Categories[top]), share*100)
				}
				step := "–" // before the first step, or no steps
				if pp.Step > 0 {
					step = fmt.Sprint(pp.Step)
				}
				p.f("| %s | %s | %s | %s |\n", pp.Phase, units.FormatBytes(pp.AllocatedBytes), step, part)
			}
		}
		if len(d.TopSites) > 0 {
			p.f("\n| top site | bytes | blocks | category |\n|---|---:|---:|---|\n")
			for _, s := range d.TopSites {
				p.f("| `%s` | %s | %s | %s |\n", mdCode(s.Site), units.FormatBytes(s.Bytes), units.Count(s.Count), s.Category)
			}
		}
	}
	markdownLeaks(p, r)
	if len(r.Suggestions) > 0 {
		p.f("\n### Suggestions\n\n| # | change | saves | cost | because |\n|---:|---|---:|---|---|\n")
		for i, s := range r.Suggestions {
			p.f("| %d | %s | ~%s | %s | %s |\n", i+1, mdText(s.Title), units.FormatBytes(s.EstimatedSavingsBytes), mdText(s.Cost), mdText(s.Because))
		}
		for i, s := range r.Suggestions {
			if s.How == "" {
				continue
			}
			p.f("\n<details><summary>%d. %s: how</summary>\n\n```python\n", i+1, mdText(s.Title))
			for _, l := range strings.Split(s.How, "\n") {
				p.f("%s\n", mdFenced(l))
			}
			p.f("```\n\n</details>\n")
		}
	}
	whatIfMarkdown(p, r)
	if len(r.Diagnostics) > 0 {
		p.f("\n<details><summary>Notes on completeness</summary>\n\n")
		for _, d := range r.Diagnostics {
			p.f("- %s\n", mdText(d.Message))
		}
		p.f("\n</details>\n")
	}
	return p.err
}

// mdFenced makes one line safe inside a fenced code block: no control
// characters, and no backtick run that could close the fence.
func mdFenced(s string) string {
	return strings.ReplaceAll(units.OneLine(s), "`", "'")
}

func fragNote(f result.Fragmentation) string {
	if f.Fragmented {
		return " — **fragmented**: the cache had the bytes but no block large enough"
	}
	return ""
}

// mdText escapes input strings for Markdown table cells and text: no HTML,
// no table breaks, no line breaks.
func mdText(s string) string {
	r := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "&", "&amp;", "\n", " ", "\r", " ", "`", "'", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`)
	return r.Replace(units.OneLine(s))
}

// mdCode makes a string safe inside `code` in a table cell.
func mdCode(s string) string {
	return strings.NewReplacer("`", "'", "|", `\|`, "\n", " ", "\r", " ").Replace(units.OneLine(s))
}
