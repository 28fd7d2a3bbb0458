package diff

import (
	"strings"

	"github.com/torchmem/torchmem/result"
)

// sitesListed is every site a device's analysis names anywhere: at the
// peak or the OOM, at any phase's peak.
func sitesListed(d *result.DeviceResult) map[string]bool {
	m := map[string]bool{}
	for _, s := range d.TopSites {
		m[s.Site] = true
	}
	for _, pp := range d.PhasePeaks {
		for _, s := range pp.TopSites {
			m[s.Site] = true
		}
	}
	if d.OOM != nil {
		for _, s := range d.OOM.TopSites {
			m[s.Site] = true
		}
	}
	return m
}

// SiteMatch says which site of one run is which of another, for diff and
// for check alike: a site is matched by its name (its user frame), else —
// the code moved to another line — by its file and function when exactly
// one site of each run has them.
type SiteMatch struct {
	bAll, nAll map[string]bool   // every site each run lists
	moved      map[string]string // new name → base name, for code that moved
	movedTo    map[string]string // base name → new name
}

// MatchSites pairs the sites of a device in two runs (b the base).
func MatchSites(b, n *result.DeviceResult) SiteMatch {
	m := SiteMatch{bAll: sitesListed(b), nAll: sitesListed(n), movedTo: map[string]string{}}
	m.moved = movedSites(m.bAll, m.nAll)
	for n, b := range m.moved {
		m.movedTo[b] = n
	}
	return m
}

// BaseName is the base run's name of the new run's site.
func (m SiteMatch) BaseName(site string) string {
	if b, ok := m.moved[site]; ok {
		return b
	}
	return site
}

// movedSites pairs the sites one run lists and the other does not by their
// file and function, when exactly one site of each run has them: the same
// code moved to another line. It maps the new run's name to the base's.
func movedSites(bAll, nAll map[string]bool) map[string]string {
	byFunc := func(sites, other map[string]bool) map[string][]string {
		m := map[string][]string{}
		for name := range sites {
			if !other[name] {
				if k, ok := siteFunc(name); ok {
					m[k] = append(m[k], name)
				}
			}
		}
		return m
	}
	bf, nf := byFunc(bAll, nAll), byFunc(nAll, bAll)
	moved := map[string]string{}
	for k, ns := range nf {
		if bs := bf[k]; len(ns) == 1 && len(bs) == 1 {
			moved[ns[0]] = bs[0]
		}
	}
	return moved
}

// siteFunc is a site's file and function without its line
// ("model.py:39 forward" → "model.py forward"); ok is false for a site
// that names no Python frame.
func siteFunc(site string) (string, bool) {
	file, rest, ok := strings.Cut(site, ":")
	if !ok || strings.HasPrefix(site, "<") {
		return "", false
	}
	line, fn, ok := strings.Cut(rest, " ")
	if !ok || line == "" || strings.Trim(line, "0123456789") != "" {
		return "", false
	}
	return file + " " + fn, true
}
