package check

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/diff"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// checkBaseline compares a device with the same device of the baseline,
// like with like: the overall peak; then, for every phase both runs have,
// that phase's peak and each category at it (those non-zero in either run).
// A peak that moved from the optimizer step to forward thus compares
// forward's activations with forward's, not with the optimizer step's.
// Growth counts when it passes both the tolerance and the noise floor
// (floor, of the baseline device's peak). A failed comparison names the
// allocation sites that grew most, matched across the runs as diff matches
// them; a baseline in another unit than the run's (unit) is compared with
// a note.
func checkBaseline(d *result.DeviceResult, unit string, base *result.Result, tol Tolerance, floor Floor) []Item {
	bd := baselineDevice(base, d.Device)
	if bd == nil {
		msg := fmt.Sprintf("device %d is not in the baseline: no regression check", d.Device)
		if d.OOM != nil {
			msg = fmt.Sprintf("device %d ran out of memory (see the out-of-memory check) and is not in the baseline: no regression check", d.Device)
		}
		return []Item{{Name: fmt.Sprintf("device %d: baseline", d.Device), Kind: CheckKindRegression, Key: BudgetPeak,
			Device: d.Device, Status: CheckSkip, Actual: d.Peak.AllocatedBytes, Message: msg}}
	}
	noise := floor.Of(bd.Peak.AllocatedBytes)
	match := diff.MatchSites(bd, d)
	peak := regression(d.Device, BudgetPeak, bd.Peak.AllocatedBytes, d.Peak.AllocatedBytes, tol, noise)
	if peak.Status == CheckFail {
		peak.Sites = siteGrowth(sitesAtPeak(bd), sitesAtPeak(d), -1, match)
	}
	items := []Item{peak}
	switch {
	case base.AllocatedUnit == "" && unit == result.AllocatedUnit:
		items = append(items, Item{Name: fmt.Sprintf("device %d: units vs baseline", d.Device), Kind: CheckKindRegression,
			Key: BudgetPeak, Device: d.Device, Status: CheckSkip,
			Message: fmt.Sprintf("device %d: the baseline counts requested bytes (written before torchmem counted allocator blocks, "+
				"PyTorch's memory_allocated() unit): this run's figures count blocks, typically 0.5–3%% more for the same memory; "+
				"rewrite the baseline with torchmem check --update-baseline", d.Device)})
	case base.AllocatedUnit != unit:
		items = append(items, Item{Name: fmt.Sprintf("device %d: units vs baseline", d.Device), Kind: CheckKindRegression,
			Key: BudgetPeak, Device: d.Device, Status: CheckSkip,
			Message: fmt.Sprintf("device %d: the baseline counts %s, this run %s: the same memory gives other figures; "+
				"compare files of one kind", d.Device, unitWords(base.AllocatedUnit), unitWords(unit))})
	}

	bp, _ := diff.PhasePeaks(bd.Phases)
	np, _ := diff.PhasePeaks(d.Phases)
	noCategories := false
	for _, ph := range budgetPhases {
		b, inB := bp[ph]
		n, inN := np[ph]
		key := BudgetPhasePrefix + string(ph)
		switch {
		case inB && inN:
			it := regression(d.Device, key, b, n, tol, noise)
			bpp, npp := bd.PhasePeakOf(ph), d.PhasePeakOf(ph)
			if bpp != nil && npp != nil && it.Status == CheckFail {
				it.Sites = siteGrowth(bpp.TopSites, npp.TopSites, -1, match)
			}
			items = append(items, it)
			bc, nc, ok := phaseCategories(bd, d, ph)
			if !ok {
				noCategories = true
				continue
			}
			for c := result.Category(0); c < result.NumCategories; c++ {
				if bc[c] == 0 && nc[c] == 0 {
					continue
				}
				ci := regression(d.Device, key+":"+c.String(), bc[c], nc[c], tol, noise)
				if bpp != nil && npp != nil && ci.Status == CheckFail {
					ci.Sites = siteGrowth(bpp.TopSites, npp.TopSites, c, match)
				}
				items = append(items, ci)
			}
		case inB:
			items = append(items, Item{Name: fmt.Sprintf("device %d: %s vs baseline", d.Device, key), Kind: CheckKindRegression,
				Key: key, Device: d.Device, Status: CheckSkip, Baseline: &b,
				Message: fmt.Sprintf("device %d: the baseline has %s phase (peak %s) and this run has none: not compared", d.Device, withArticle(string(ph)), units.FormatBytes(b))})
		case inN:
			items = append(items, Item{Name: fmt.Sprintf("device %d: %s vs baseline", d.Device, key), Kind: CheckKindRegression,
				Key: key, Device: d.Device, Status: CheckSkip, Actual: n,
				Message: fmt.Sprintf("device %d: this run has %s phase (peak %s) and the baseline has none: not compared", d.Device, withArticle(string(ph)), units.FormatBytes(n))})
		}
	}
	if noCategories {
		items = append(items, Item{Name: fmt.Sprintf("device %d: categories by phase vs baseline", d.Device), Kind: CheckKindRegression,
			Key: BudgetPhasePrefix + "*", Device: d.Device, Status: CheckSkip,
			Message: fmt.Sprintf("device %d: categories not compared in phases other than the peak's: the baseline has no categories by phase "+
				"(written by an older torchmem; rewrite it with torchmem check --update-baseline)", d.Device)})
	}
	return items
}

// baselineDevice is the baseline's device with the given id, or nil.
func baselineDevice(base *result.Result, id int) *result.DeviceResult {
	for i := range base.Devices {
		if base.Devices[i].Device == id {
			return &base.Devices[i]
		}
	}
	return nil
}

// phaseCategories returns the categories at phase ph's peak in both runs.
// An analysis written before phase peaks were recorded has them only for
// the phase of its overall peak (its peak's categories); ok is false when
// either run lacks them.
func phaseCategories(b, n *result.DeviceResult, ph result.Phase) (bc, nc result.Categories, ok bool) {
	of := func(d *result.DeviceResult) (result.Categories, bool) {
		if pp := d.PhasePeakOf(ph); pp != nil {
			return pp.Categories, true
		}
		if len(d.PhasePeaks) == 0 && d.Peak.Phase == ph {
			return d.Peak.Categories, true
		}
		return result.Categories{}, false
	}
	bc, okB := of(b)
	nc, okN := of(n)
	return bc, nc, okB && okN
}

// sitesAtPeak returns the sites live at the device's overall peak: its top
// sites when it has no OOM (they are then the peak's), else those of its
// phase's peak when that is the same moment.
func sitesAtPeak(d *result.DeviceResult) []result.Site {
	if d.OOM == nil {
		return d.TopSites
	}
	if pp := d.PhasePeakOf(d.Peak.Phase); pp != nil && pp.EventIndex == d.Peak.EventIndex {
		return pp.TopSites
	}
	return nil
}

// checkSitesShown is how many allocation sites a failed check names.
const checkSitesShown = 3

// siteGrowth returns the sites that grew most from base to cur, at most
// checkSitesShown, largest growth first. A site of cur is matched with the
// base's as diff matches it (match: the same name, else the same code moved
// to another line); one the base lacks counts as 0 there. With cat ≥ 0
// only the sites of that category count.
func siteGrowth(base, cur []result.Site, cat result.Category, match diff.SiteMatch) []CheckSite {
	before := map[string]int64{}
	for _, s := range base {
		if cat < 0 || s.Category == cat {
			before[s.Site] = units.SatAdd(before[s.Site], s.Bytes)
		}
	}
	now := map[string]*CheckSite{}
	var order []string
	for _, s := range cur {
		if cat >= 0 && s.Category != cat {
			continue
		}
		cs := now[s.Site]
		if cs == nil {
			baseName := match.BaseName(s.Site)
			b := before[baseName]
			cs = &CheckSite{Site: s.Site, File: s.File, Line: s.Line, Baseline: &b}
			if baseName != s.Site {
				cs.BaselineSite = baseName
			}
			now[s.Site] = cs
			order = append(order, s.Site)
		}
		cs.Bytes = units.SatAdd(cs.Bytes, s.Bytes)
	}
	var out []CheckSite
	for _, name := range order {
		if cs := now[name]; cs.Bytes > *cs.Baseline {
			out = append(out, *cs)
		}
	}
	sortSites(out)
	return firstSites(out)
}

// largestSites returns the largest sites of a moment (of category cat when
// cat ≥ 0), at most checkSitesShown: what fills a budget that is exceeded.
func largestSites(sites []result.Site, cat result.Category) []CheckSite {
	var out []CheckSite
	for _, s := range sites {
		if cat < 0 || s.Category == cat {
			out = append(out, CheckSite{Site: s.Site, File: s.File, Line: s.Line, Bytes: s.Bytes})
		}
	}
	sortSites(out)
	return firstSites(out)
}

func sortSites(s []CheckSite) {
	growth := func(c CheckSite) int64 {
		if c.Baseline != nil {
			return units.SatSub(c.Bytes, *c.Baseline)
		}
		return c.Bytes
	}
	for i := 1; i < len(s); i++ { // insertion sort: stable, short lists
		for j := i; j > 0 && growth(s[j]) > growth(s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func firstSites(s []CheckSite) []CheckSite {
	if len(s) > checkSitesShown {
		return s[:checkSitesShown]
	}
	return s
}

// CheckSite is an allocation site behind a failed check: for a comparison
// with the baseline, a site that grew most; for a budget, a site that
// holds most of what is over it.
type CheckSite struct {
	Site string `json:"site"`
	// File and Line locate the site's frame as the recording machine wrote
	// it (absent when no Python frame names the site).
	File  string `json:"file,omitempty"`
	Line  int64  `json:"line,omitempty"`
	Bytes int64  `json:"bytes"`
	// Baseline is the site's bytes in the baseline (comparisons only).
	Baseline *int64 `json:"baseline_bytes,omitempty"`
	// BaselineSite is the site's name in the baseline when its code moved
	// to another line there (diff's SiteDiff.BaseSite).
	BaselineSite string `json:"baseline_site,omitempty"`
}

// Describe writes the site for a message: "model.py:39 forward 1.2 GiB →
// 2.0 GiB (+800 MiB)", "model.py:41 forward (was model.py:39 forward) 1.2
// GiB → 2.0 GiB (+800 MiB)" for code that moved, or, without a baseline,
// "model.py:39 forward 2.0 GiB".
func (s CheckSite) Describe() string {
	if s.Baseline == nil {
		return s.Site + " " + units.FormatBytes(s.Bytes)
	}
	name := s.Site
	if s.BaselineSite != "" {
		name += " (was " + s.BaselineSite + ")"
	}
	return fmt.Sprintf("%s %s → %s (+%s)", name, units.FormatBytes(*s.Baseline), units.FormatBytes(s.Bytes), units.FormatBytes(units.SatSub(s.Bytes, *s.Baseline)))
}

// phaseCategoryKey splits "phase:forward:activation" into its phase and
// category; ok is false for any other key.
func phaseCategoryKey(key string) (result.Phase, result.Category, bool) {
	rest, ok := strings.CutPrefix(key, BudgetPhasePrefix)
	if !ok {
		return "", 0, false
	}
	ph, cat, ok := strings.Cut(rest, ":")
	if !ok {
		return "", 0, false
	}
	c, ok := result.ParseCategory(cat)
	return result.Phase(ph), c, ok
}

// withArticle puts "a" or "an" before a phase name: "an optimizer".
func withArticle(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
}

// unitWords names a Result's AllocatedUnit in a sentence.
func unitWords(unit string) string {
	switch unit {
	case result.AllocatedUnit:
		return "allocator blocks (a snapshot's or chrome trace's figures)"
	case result.AllocatedUnitTensor:
		return "tensor sizes (a memory timeline's figures)"
	case "":
		return "requested bytes (written before torchmem counted allocator blocks)"
	}
	return "an unknown unit " + strconv.Quote(units.OneLine(unit))
}
