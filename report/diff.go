package report

import (
	"fmt"
	"io"

	"github.com/torchmem/torchmem/diff"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// diffSitesText and diffSitesMarkdown bound the sites a diff lists.
const (
	diffSitesText     = 15
	diffSitesMarkdown = 25
)

// DiffJSON writes a diff as schema torchmem.diff/v1, with exact bytes.
func DiffJSON(w io.Writer, d *diff.Result) error {
	return writeJSON(w, d)
}

// Change formats a delta for people: "+1.5 GiB (+12.0%)", "-512 MiB
// (-3.1%)", "+20 MiB (was 0)", "0 B".
func Change(d diff.Delta) string {
	if d.Delta == 0 {
		return "0 B"
	}
	s := units.FormatBytes(d.Delta)
	if d.Delta > 0 {
		s = "+" + s
	}
	if pct, ok := d.Percent(); ok {
		return fmt.Sprintf("%s (%+.1f%%)", s, pct)
	}
	return s + " (was 0)"
}

// DiffHeadline is the one sentence a diff starts with: how the peak of the
// device that changed most moved, and any OOM that appeared or went away.
func DiffHeadline(d *diff.Result) string {
	if len(d.Devices) == 0 {
		return "No device memory in either run."
	}
	for _, dd := range d.Devices {
		switch dd.OOM.Status {
		case diff.OOMAdded:
			return fmt.Sprintf("Device %d: the new run ran out of memory (%s requested in %s); the base run did not.",
				dd.Device, units.FormatBytes(dd.OOM.New.RequestedBytes), dd.OOM.New.Phase)
		case diff.OOMFixed:
			return fmt.Sprintf("Device %d: the base run ran out of memory and the new run did not; peak %s → %s, %s.",
				dd.Device, units.FormatBytes(dd.PeakAllocated.Base), units.FormatBytes(dd.PeakAllocated.New), Change(dd.PeakAllocated))
		}
	}
	best := d.Devices[0]
	for _, dd := range d.Devices[1:] {
		if diffAbs(dd.PeakAllocated.Delta) > diffAbs(best.PeakAllocated.Delta) {
			best = dd
		}
	}
	if best.PeakAllocated.Delta == 0 {
		return fmt.Sprintf("Device %d: the peak is unchanged at %s.", best.Device, units.FormatBytes(best.PeakAllocated.New))
	}
	s := fmt.Sprintf("Device %d: peak %s → %s, %s", best.Device, units.FormatBytes(best.PeakAllocated.Base), units.FormatBytes(best.PeakAllocated.New), Change(best.PeakAllocated))
	if c, ok := largestCategoryChange(best); ok {
		s += fmt.Sprintf("; %s changed most at the peak: %s", c.Category, Change(c.Peak))
	}
	return s + "."
}

func largestCategoryChange(dd diff.DeviceDiff) (diff.CategoryDiff, bool) {
	var best diff.CategoryDiff
	found := false
	for _, c := range dd.Categories {
		if c.Peak.Delta != 0 && (!found || diffAbs(c.Peak.Delta) > diffAbs(best.Peak.Delta)) {
			best, found = c, true
		}
	}
	return best, found
}

func diffAbs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// diffInputLine names an input; every part of it comes from a file.
func diffInputLine(in result.Input) string {
	s := in.Path
	if in.Format != "" {
		s += " (" + in.Format
		if in.Generation != "" {
			s += ", " + in.Generation
		}
		s += ")"
	}
	return units.OneLine(s)
}

func diffPresenceNote(p diff.Presence) string {
	switch p {
	case diff.OnlyNew:
		return " (only in new)"
	case diff.OnlyBase:
		return " (only in base)"
	}
	return ""
}

func diffStepLabel(s int) string {
	if s == result.NoStep {
		return "outside steps"
	}
	return fmt.Sprintf("step %d", s)
}

// shownSites are the sites a device's diff shows and the moment they are
// compared at: like with like (the same phase's peak) when both analyses
// have it, else each run's peak.
func shownSites(dd diff.DeviceDiff) ([]diff.SiteDiff, string) {
	if dd.PhaseSitesAt != "" {
		return dd.PhaseSites, dd.PhaseSitesAt
	}
	return dd.Sites, "each run's peak"
}

// movedNote says where a site was in the base run when its code moved.
func movedNote(s diff.SiteDiff) string {
	if s.BaseSite == "" {
		return ""
	}
	return " (was " + s.BaseSite + ")"
}

func sitePresence(p diff.Presence) string {
	switch p {
	case diff.OnlyNew:
		return "new"
	case diff.OnlyBase:
		return "vanished"
	}
	return "changed"
}

// changedSites returns the sites whose bytes changed (or that are new or
// vanished), at most n, and how many more there are.
func changedSites(sites []diff.SiteDiff, n int) ([]diff.SiteDiff, int) {
	var out []diff.SiteDiff
	more := 0
	for _, s := range sites {
		if s.Bytes.Delta == 0 && s.Presence == diff.InBoth {
			continue
		}
		if len(out) == n {
			more++
			continue
		}
		out = append(out, s)
	}
	return out, more
}

func diffOOMLine(o diff.OOMDiff) string {
	brief := func(b *diff.OOMBrief) string {
		return fmt.Sprintf("%s requested with %s free, in %s (step %d) at %s", units.FormatBytes(b.RequestedBytes), units.FormatBytes(b.DeviceFreeBytes), b.Phase, b.Step, b.Site)
	}
	switch o.Status {
	case diff.OOMAdded:
		return "new in the new run: " + brief(o.New)
	case diff.OOMFixed:
		return "gone: the base run ran out of memory (" + brief(o.Base) + ")"
	case diff.OOMBoth:
		return "in both runs: base " + brief(o.Base) + "; new " + brief(o.New)
	}
	return "none in either run"
}

// DiffText writes a diff for a terminal.
func DiffText(w io.Writer, d *diff.Result) error {
	p := &printer{w: w}
	p.f("torchmem diff\n")
	p.wrap("  base  ", "        ", diffInputLine(d.Base))
	p.wrap("  new   ", "        ", diffInputLine(d.New))
	p.wrap("", "", units.OneLine(DiffHeadline(d)))
	row := func(name, base, new, change string) {
		p.f("  %-24s %12s %12s  %s\n", name, base, new, change)
	}
	drow := func(name string, v diff.Delta) {
		row(name, units.FormatBytes(v.Base), units.FormatBytes(v.New), Change(v))
	}
	for _, dd := range d.Devices {
		p.f("\ndevice %s%s\n", units.OneLine(result.DeviceName(dd.Kind, dd.Device)), diffPresenceNote(dd.Presence))
		row("", "base", "new", "change")
		drow("peak allocated", dd.PeakAllocated)
		drow("reserved at the peak", dd.PeakReserved)
		drow("allocated at the end", dd.EndAllocated)
		drow("reserved at the end", dd.EndReserved)
		row("phase of the peak", units.OneLine(string(dd.PeakPhase.Base)), units.OneLine(string(dd.PeakPhase.New)), "")
		p.wrap("  OOM: ", "       ", units.OneLine(diffOOMLine(dd.OOM)))
		p.f("\n  at the peak\n")
		for _, c := range dd.Categories {
			if c.Peak.Base != 0 || c.Peak.New != 0 {
				drow("  "+c.Category.String(), c.Peak)
			}
		}
		p.f("  at the end\n")
		for _, c := range dd.Categories {
			if c.End.Base != 0 || c.End.New != 0 {
				drow("  "+c.Category.String(), c.End)
			}
		}
		if len(dd.Phases) > 0 {
			p.f("  phases (highest peak)\n")
			for _, ph := range dd.Phases {
				drow("  "+units.OneLine(string(ph.Phase))+diffPresenceNote(ph.Presence), ph.Peak)
			}
		}
		if len(dd.Steps) > 0 {
			p.f("  steps (highest peak)\n")
			for _, s := range dd.Steps {
				drow("  "+diffStepLabel(s.Step)+diffPresenceNote(s.Presence), s.Peak)
			}
		}
		all, at := shownSites(dd)
		sites, more := changedSites(all, diffSitesText)
		if len(sites) > 0 {
			p.wrap("  ", "    ", "sites live at "+at+", largest changes")
			for _, s := range sites {
				p.wrap(fmt.Sprintf("    %-8s %10s %10s  %-20s ", sitePresence(s.Presence), units.FormatBytes(s.Bytes.Base), units.FormatBytes(s.Bytes.New), Change(s.Bytes)),
					"             ", fmt.Sprintf("%s%s [%s]", units.OneLine(s.Site), movedNote(s), s.Category))
			}
			if more > 0 {
				p.f("    … %s more (--format json lists all)\n", plural(more, "site"))
			}
		}
	}
	if len(d.Leaks) > 0 {
		p.f("\nleaks\n")
		for _, l := range d.Leaks {
			p.wrap(fmt.Sprintf("  %-8s ", leakPresence(l.Presence)), "           ", fmt.Sprintf("%s on device %d at %s: %s/step → %s/step [%s]", units.OneLine(l.Kind), l.Device, units.OneLine(l.Site),
				units.FormatBytes(l.BytesPerStep.Base), units.FormatBytes(l.BytesPerStep.New), units.OneLine(string(l.Confidence))))
		}
	}
	return p.err
}

func leakPresence(p diff.Presence) string {
	switch p {
	case diff.OnlyNew:
		return "new"
	case diff.OnlyBase:
		return "fixed"
	}
	return "still"
}

// DiffMarkdown writes a diff for a pull-request comment or a ticket.
func DiffMarkdown(w io.Writer, d *diff.Result) error {
	p := &printer{w: w}
	p.f("## torchmem diff: `%s` → `%s`\n\n", mdCode(FileName(d.Base.Path)), mdCode(FileName(d.New.Path)))
	p.f("**%s**\n", mdText(DiffHeadline(d)))
	drow := func(name string, v diff.Delta) {
		p.f("| %s | %s | %s | %s |\n", name, units.FormatBytes(v.Base), units.FormatBytes(v.New), Change(v))
	}
	for _, dd := range d.Devices {
		p.f("\n### device %s%s\n\n", mdText(result.DeviceName(dd.Kind, dd.Device)), diffPresenceNote(dd.Presence))
		p.f("| | base | new | change |\n|---|---:|---:|---:|\n")
		drow("peak allocated", dd.PeakAllocated)
		drow("reserved at the peak", dd.PeakReserved)
		drow("allocated at the end", dd.EndAllocated)
		drow("reserved at the end", dd.EndReserved)
		p.f("| phase of the peak | %s | %s | |\n", mdText(string(dd.PeakPhase.Base)), mdText(string(dd.PeakPhase.New)))
		p.f("\nOOM: %s.\n", mdText(diffOOMLine(dd.OOM)))
		p.f("\n| category | at peak: base | new | change | at end: base | new | change |\n|---|---:|---:|---:|---:|---:|---:|\n")
		for _, c := range dd.Categories {
			if c.Peak.Base == 0 && c.Peak.New == 0 && c.End.Base == 0 && c.End.New == 0 {
				continue
			}
			p.f("| %s | %s | %s | %s | %s | %s | %s |\n", c.Category, units.FormatBytes(c.Peak.Base), units.FormatBytes(c.Peak.New), Change(c.Peak),
				units.FormatBytes(c.End.Base), units.FormatBytes(c.End.New), Change(c.End))
		}
		if len(dd.Phases) > 0 {
			p.f("\n| phase (highest peak) | base | new | change |\n|---|---:|---:|---:|\n")
			for _, ph := range dd.Phases {
				drow(mdText(string(ph.Phase))+diffPresenceNote(ph.Presence), ph.Peak)
			}
		}
		if len(dd.Steps) > 0 {
			p.f("\n| step (highest peak) | base | new | change |\n|---|---:|---:|---:|\n")
			for _, s := range dd.Steps {
				drow(diffStepLabel(s.Step)+diffPresenceNote(s.Presence), s.Peak)
			}
		}
		all, at := shownSites(dd)
		sites, more := changedSites(all, diffSitesMarkdown)
		if len(sites) > 0 {
			p.f("\n| site live at %s | | base | new | change | category |\n|---|---|---:|---:|---:|---|\n", mdText(at))
			for _, s := range sites {
				p.f("| `%s`%s | %s | %s | %s | %s | %s |\n", mdCode(s.Site), mdText(movedNote(s)), sitePresence(s.Presence), units.FormatBytes(s.Bytes.Base), units.FormatBytes(s.Bytes.New), Change(s.Bytes), s.Category)
			}
			if more > 0 {
				p.f("\n… %s more (`--format json` lists all).\n", plural(more, "site"))
			}
		}
	}
	if len(d.Leaks) > 0 {
		p.f("\n### Leaks\n\n| | kind | device | site | per step: base | new | confidence |\n|---|---|---:|---|---:|---:|---|\n")
		for _, l := range d.Leaks {
			p.f("| %s | %s | %d | `%s` | %s | %s | %s |\n", leakPresence(l.Presence), mdText(l.Kind), l.Device, mdCode(l.Site),
				units.FormatBytes(l.BytesPerStep.Base), units.FormatBytes(l.BytesPerStep.New), mdText(string(l.Confidence)))
		}
	}
	return p.err
}
