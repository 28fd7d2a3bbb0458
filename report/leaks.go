package report

import (
	"fmt"
	"strings"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// leakGroup is the findings of one step pattern: one device, one kind and
// confidence, the same steps, the same explanation and remedy (four
// growing lists at four sites of one loop). A report says what they share
// once and lists the sites.
type leakGroup struct {
	leaks []result.Leak
	// steps says which steps, of how many, and where the steps came from.
	steps string
}

// leakGroups groups the findings of r in the order they first appear.
func leakGroups(r *result.Result) []leakGroup {
	type key struct {
		device                   int
		kind, steps, explanation string
		remedy                   string
		confidence               result.Confidence
	}
	var out []leakGroup
	index := map[key]int{}
	for _, l := range r.Leaks {
		k := key{l.Device, l.Kind, result.StepNumbers(l.SeenInSteps), l.Explanation, l.Remedy, l.Confidence}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, leakGroup{steps: leakSteps(r, l)})
		}
		out[i].leaks = append(out[i].leaks, l)
	}
	return out
}

// leakSteps names the steps of a finding: "steps 1–8 of 8, from the loop
// at eval.py:38 evaluate".
func leakSteps(r *result.Result, l result.Leak) string {
	s := result.StepNumbers(l.SeenInSteps)
	for _, d := range r.Devices {
		if d.Device != l.Device || d.Steps == nil {
			continue
		}
		n := 0
		for _, sp := range d.Steps.Spans {
			if sp.Complete {
				n++
			}
		}
		return fmt.Sprintf("%s of %d, from %s", s, n, d.Steps.Evidence)
	}
	return s
}

// sums is what a group holds at the end and gains per step.
func (g *leakGroup) sums() (held, perStep int64) {
	for _, l := range g.leaks {
		held += l.TotalBytes
		perStep += l.BytesPerStep
	}
	return held, perStep
}

// fix is the group's remedy with what it saves (a single finding's own
// fix).
func (g *leakGroup) fix() string {
	l := g.leaks[0]
	if len(g.leaks) == 1 || l.Remedy == "" {
		return l.Fix
	}
	held, per := g.sums()
	return fmt.Sprintf("%s Saves %s now and %s for every further step.", l.Remedy, units.FormatBytes(held), units.FormatBytes(per))
}

// title is the group's first line: confidence, kind, device, the sites'
// count, steps and what they hold.
func (g *leakGroup) title() string {
	l := g.leaks[0]
	held, per := g.sums()
	what := "at " + units.OneLine(l.Site)
	if len(g.leaks) > 1 {
		what = fmt.Sprintf("at %d sites", len(g.leaks))
	}
	return fmt.Sprintf("[%s] %s on %s %s, %s: %s per step, %s held", l.Confidence, units.OneLine(l.Kind), deviceRef(l.Device), what,
		units.OneLine(g.steps), units.FormatBytes(per), units.FormatBytes(held))
}

// siteLine is one finding of a group of several: its site and bytes.
func siteLine(l result.Leak) string {
	s := fmt.Sprintf("%s: %s per step, %s held", units.OneLine(l.Site), units.FormatBytes(l.BytesPerStep), units.FormatBytes(l.TotalBytes))
	if l.StepsUntilFull > 0 {
		s += fmt.Sprintf(", the device full in %d more steps", l.StepsUntilFull)
	}
	return s
}

// textLeaks writes the leak findings for a terminal, a group at a time,
// every line within TextWidth.
func textLeaks(p *printer, r *result.Result) {
	if len(r.Leaks) == 0 {
		return
	}
	p.f("\nleaks\n")
	for _, g := range leakGroups(r) {
		p.wrap("  ", "      ", g.title())
		if len(g.leaks) == 1 {
			p.wrap("    ", "    ", units.OneLine(g.leaks[0].Evidence))
		} else {
			for _, l := range g.leaks {
				p.wrap("    - ", "      ", siteLine(l))
			}
		}
		if e := g.leaks[0].Explanation; e != "" {
			p.wrap("    ", "    ", units.OneLine(e))
		}
		p.wrap("    fix: ", "      ", units.OneLine(g.fix()))
	}
}

// markdownLeaks writes the leak findings for a bug ticket: per group, the
// sites in a table, then what they share.
func markdownLeaks(p *printer, r *result.Result) {
	if len(r.Leaks) == 0 {
		return
	}
	p.f("\n### Leaks\n")
	for _, g := range leakGroups(r) {
		l := g.leaks[0]
		p.f("\n**%s** on %s (%s confidence), %s.\n\n", mdText(l.Kind), deviceRef(l.Device), l.Confidence, mdText(g.steps))
		p.f("| site | per step | held at the end |\n|---|---:|---:|\n")
		for _, x := range g.leaks {
			p.f("| `%s` | %s | %s |\n", mdCode(x.Site), units.FormatBytes(x.BytesPerStep), units.FormatBytes(x.TotalBytes))
		}
		var text []string
		if len(g.leaks) == 1 {
			text = append(text, mdText(l.Evidence))
		}
		if l.Explanation != "" {
			text = append(text, mdText(l.Explanation))
		}
		p.f("\n%s\n\nFix: %s\n", strings.Join(text, " "), mdText(g.fix()))
	}
}
