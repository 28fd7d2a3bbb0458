package analysis

import (
	"fmt"
	"sort"
	"strings"
)

// DiffSchemaID is the JSON schema identifier of DiffResult.
const DiffSchemaID = "torchmem.diff/v1"

// Presence says on which side of a diff an item was found.
type Presence string

// Presences. Changed and Unchanged are items found on both sides.
const (
	// InBoth is an item found in both runs (devices, phases, steps).
	InBoth Presence = "both"
	// OnlyNew is an item found only in the new run ("new site").
	OnlyNew Presence = "new"
	// OnlyBase is an item found only in the base run ("vanished site").
	OnlyBase Presence = "vanished"
)

// Delta is one quantity in the base and the new run. A side where the item
// is absent counts as 0.
type Delta struct {
	Base  int64 `json:"base"`
	New   int64 `json:"new"`
	Delta int64 `json:"delta"`
}

// NewDelta returns the Delta from base to new.
func NewDelta(base, new int64) Delta { return Delta{Base: base, New: new, Delta: satSub(new, base)} }

// Percent is the change relative to the base in percent; ok is false when
// the base is 0 (the change has no finite ratio).
func (d Delta) Percent() (pct float64, ok bool) {
	if d.Base == 0 {
		return 0, false
	}
	return float64(d.Delta) * 100 / float64(d.Base), true
}

// DiffResult is a semantic diff of two analyses of related runs: peaks,
// categories, phases, steps, sites, OOMs and leaks, per device.
type DiffResult struct {
	Schema  string       `json:"schema"`
	Base    Input        `json:"base"`
	New     Input        `json:"new"`
	Devices []DeviceDiff `json:"devices"`
	Leaks   []LeakDiff   `json:"leaks"`
}

// DeviceDiff compares one device (matched by device id) of both runs.
type DeviceDiff struct {
	Device   int      `json:"device"`
	Kind     string   `json:"kind"`
	Presence Presence `json:"presence"`
	// PeakAllocated and PeakReserved are at the moment of the peak of
	// allocated memory; EndAllocated and EndReserved at the dump (the end).
	PeakAllocated Delta     `json:"peak_allocated"`
	PeakReserved  Delta     `json:"peak_reserved"`
	EndAllocated  Delta     `json:"end_allocated"`
	EndReserved   Delta     `json:"end_reserved"`
	PeakPhase     PhasePair `json:"peak_phase"`
	// Categories has every category, in the order of Category.
	Categories []CategoryDiff `json:"categories"`
	// Phases compares the highest peak of each phase over all steps, in the
	// order the phases first occur (base first).
	Phases []PhaseDiff `json:"phases"`
	// Steps compares the highest peak of each step, aligned by step number.
	Steps []StepDiff `json:"steps"`
	// Sites compares the bytes live at the peak (at the OOM where there is
	// one) per allocation site, largest change first. A site is matched by
	// its user frame: its name, else — the code moved to another line — its
	// file and function when one site of each run has them. A site is
	// "new" only when the base run lists it nowhere (not at the peak, at no
	// phase's peak, not at the OOM), and "vanished" likewise; only the sites
	// each Result lists take part, so a site absent from a short list (a
	// baseline written with --top 10) may be below that list's cut rather
	// than gone.
	Sites []SiteDiff `json:"sites"`
	// PhaseSites compares the sites like with like: at the peak of the
	// phase where the new run peaked, in each run (PhaseSitesAt: "the
	// forward peak"), matched as Sites are. A peak that moved from the
	// optimizer step to forward compares forward with forward. Null when
	// either run has no peak of that phase (analyses without phase peaks).
	PhaseSites   []SiteDiff `json:"phase_sites"`
	PhaseSitesAt string     `json:"phase_sites_at,omitempty"`
	OOM          OOMDiff    `json:"oom"`
}

// PhasePair is the phase of a moment in the base and the new run.
type PhasePair struct {
	Base Phase `json:"base"`
	New  Phase `json:"new"`
}

// CategoryDiff compares one category at the peak and at the end.
type CategoryDiff struct {
	Category Category `json:"category"`
	Peak     Delta    `json:"peak"`
	End      Delta    `json:"end"`
}

// PhaseDiff compares the highest peak of one phase.
type PhaseDiff struct {
	Phase    Phase    `json:"phase"`
	Presence Presence `json:"presence"`
	Peak     Delta    `json:"peak"`
}

// StepDiff compares the highest peak of one step (NoStep: events outside
// every ProfilerStep range).
type StepDiff struct {
	Step     int      `json:"step"`
	Presence Presence `json:"presence"`
	Peak     Delta    `json:"peak"`
}

// SiteDiff compares the memory of one allocation site.
type SiteDiff struct {
	Site     string   `json:"site"`
	Presence Presence `json:"presence"`
	Bytes    Delta    `json:"bytes"`
	Count    Delta    `json:"count"`
	// Category is the site's dominant category in the new run (the base's
	// for a vanished site).
	Category Category `json:"category"`
	// BaseSite is the site's name in the base run when its code moved to
	// another line (same file and function).
	BaseSite string `json:"base_site,omitempty"`
}

// OOMStatus says how the out-of-memory state changed.
type OOMStatus string

// OOM statuses.
const (
	OOMNone  OOMStatus = "none"  // no OOM in either run
	OOMBoth  OOMStatus = "both"  // an OOM in both runs
	OOMAdded OOMStatus = "new"   // an OOM in the new run only
	OOMFixed OOMStatus = "fixed" // an OOM in the base run only
)

// OOMDiff compares the OOMs of one device.
type OOMDiff struct {
	Status OOMStatus `json:"status"`
	Base   *OOMBrief `json:"base"`
	New    *OOMBrief `json:"new"`
}

// OOMBrief is the gist of an OOM for a diff.
type OOMBrief struct {
	RequestedBytes  int64  `json:"requested_bytes"`
	DeviceFreeBytes int64  `json:"device_free_bytes"`
	AllocatedBytes  int64  `json:"allocated_bytes"`
	Phase           Phase  `json:"phase"`
	Step            int    `json:"step"`
	Site            string `json:"site"`
}

// LeakDiff is a leak finding of one run matched (by device, kind and site)
// against the other.
type LeakDiff struct {
	Device       int        `json:"device"`
	Kind         string     `json:"kind"`
	Site         string     `json:"site"`
	Presence     Presence   `json:"presence"`
	BytesPerStep Delta      `json:"bytes_per_step"`
	Confidence   Confidence `json:"confidence"`
}

// Diff compares two analyses: base (the reference run) and new. Devices
// are matched by id; a device in only one run is listed with the other
// side's numbers 0. Diff does not modify its arguments.
func Diff(base, new *Result) *DiffResult {
	d := &DiffResult{Schema: DiffSchemaID, Base: base.Input, New: new.Input, Devices: []DeviceDiff{}, Leaks: []LeakDiff{}}
	bd := map[int]*DeviceResult{}
	nd := map[int]*DeviceResult{}
	var ids []int
	for i := range base.Devices {
		if _, ok := bd[base.Devices[i].Device]; !ok {
			bd[base.Devices[i].Device] = &base.Devices[i]
			ids = append(ids, base.Devices[i].Device)
		}
	}
	for i := range new.Devices {
		if _, ok := nd[new.Devices[i].Device]; !ok {
			nd[new.Devices[i].Device] = &new.Devices[i]
			if bd[new.Devices[i].Device] == nil {
				ids = append(ids, new.Devices[i].Device)
			}
		}
	}
	sort.Ints(ids)
	for _, id := range ids {
		d.Devices = append(d.Devices, diffDevice(id, bd[id], nd[id]))
	}
	d.Leaks = diffLeaks(base.Leaks, new.Leaks)
	return d
}

// diffDevice compares one device; b or n is nil when the device is absent
// from that run.
func diffDevice(id int, b, n *DeviceResult) DeviceDiff {
	var zero DeviceResult
	dd := DeviceDiff{Device: id, Presence: InBoth}
	switch {
	case b == nil:
		dd.Presence, b = OnlyNew, &zero
	case n == nil:
		dd.Presence, n = OnlyBase, &zero
	}
	dd.Kind = n.Kind
	if dd.Kind == "" {
		dd.Kind = b.Kind
	}
	dd.PeakAllocated = NewDelta(b.Peak.AllocatedBytes, n.Peak.AllocatedBytes)
	dd.PeakReserved = NewDelta(b.Peak.ReservedBytes, n.Peak.ReservedBytes)
	dd.EndAllocated = NewDelta(b.AtEnd.AllocatedBytes, n.AtEnd.AllocatedBytes)
	dd.EndReserved = NewDelta(b.AtEnd.ReservedBytes, n.AtEnd.ReservedBytes)
	dd.PeakPhase = PhasePair{Base: b.Peak.Phase, New: n.Peak.Phase}
	for c := Category(0); c < NumCategories; c++ {
		dd.Categories = append(dd.Categories, CategoryDiff{Category: c,
			Peak: NewDelta(b.Peak.Categories[c], n.Peak.Categories[c]),
			End:  NewDelta(b.AtEnd.Categories[c], n.AtEnd.Categories[c])})
	}
	dd.Phases = diffPhases(b.Phases, n.Phases)
	dd.Steps = diffSteps(b.Phases, n.Phases)
	match := matchSites(b, n)
	dd.Sites = diffSites(b.TopSites, n.TopSites, match)
	if bs, ns, at, ok := phaseSitesToCompare(b, n); ok {
		dd.PhaseSites, dd.PhaseSitesAt = diffSites(bs, ns, match), at
	}
	dd.OOM = diffOOM(b.OOM, n.OOM)
	return dd
}

// PhasePeaks returns the highest peak of each phase over all steps, and the
// phases in the order they first occur.
func PhasePeaks(spans []PhaseSpan) (map[Phase]int64, []Phase) {
	peak := map[Phase]int64{}
	var order []Phase
	for _, s := range spans {
		if v, ok := peak[s.Phase]; !ok {
			order = append(order, s.Phase)
			peak[s.Phase] = s.PeakAllocatedBytes
		} else if s.PeakAllocatedBytes > v {
			peak[s.Phase] = s.PeakAllocatedBytes
		}
	}
	return peak, order
}

func diffPhases(b, n []PhaseSpan) []PhaseDiff {
	bp, border := PhasePeaks(b)
	np, norder := PhasePeaks(n)
	out := []PhaseDiff{}
	for _, ph := range border {
		pr := InBoth
		if _, ok := np[ph]; !ok {
			pr = OnlyBase
		}
		out = append(out, PhaseDiff{Phase: ph, Presence: pr, Peak: NewDelta(bp[ph], np[ph])})
	}
	for _, ph := range norder {
		if _, ok := bp[ph]; !ok {
			out = append(out, PhaseDiff{Phase: ph, Presence: OnlyNew, Peak: NewDelta(0, np[ph])})
		}
	}
	return out
}

// stepPeaks returns the highest peak of each step.
func stepPeaks(spans []PhaseSpan) map[int]int64 {
	peak := map[int]int64{}
	for _, s := range spans {
		if v, ok := peak[s.Step]; !ok || s.PeakAllocatedBytes > v {
			peak[s.Step] = s.PeakAllocatedBytes
		}
	}
	return peak
}

func diffSteps(b, n []PhaseSpan) []StepDiff {
	bp, np := stepPeaks(b), stepPeaks(n)
	steps := make([]int, 0, len(bp)+len(np))
	for s := range bp {
		steps = append(steps, s)
	}
	for s := range np {
		if _, ok := bp[s]; !ok {
			steps = append(steps, s)
		}
	}
	sort.Ints(steps)
	out := make([]StepDiff, 0, len(steps))
	for _, s := range steps {
		_, inB := bp[s]
		_, inN := np[s]
		pr := InBoth
		switch {
		case !inB:
			pr = OnlyNew
		case !inN:
			pr = OnlyBase
		}
		out = append(out, StepDiff{Step: s, Presence: pr, Peak: NewDelta(bp[s], np[s])})
	}
	return out
}

// phaseSitesToCompare picks the sites of both runs at the peak of the
// phase where the new run peaked (like with like); ok is false when either
// run has no peak of that phase (or no phase peaks at all).
func phaseSitesToCompare(b, n *DeviceResult) (bs, ns []Site, at string, ok bool) {
	ph := n.Peak.Phase
	bp, np := b.PhasePeakOf(ph), n.PhasePeakOf(ph)
	if bp == nil || np == nil {
		return nil, nil, "", false
	}
	return bp.TopSites, np.TopSites, fmt.Sprintf("the %s peak", ph), true
}

// sitesListed is every site a device's analysis names anywhere: at the
// peak or the OOM, at any phase's peak.
func sitesListed(d *DeviceResult) map[string]bool {
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

// siteMatch says which site of one run is which of another, for diff and
// for check alike: a site is matched by its name (its user frame), else —
// the code moved to another line — by its file and function when exactly
// one site of each run has them.
type siteMatch struct {
	bAll, nAll map[string]bool   // every site each run lists
	moved      map[string]string // new name → base name, for code that moved
	movedTo    map[string]string // base name → new name
}

// matchSites pairs the sites of a device in two runs (b the base).
func matchSites(b, n *DeviceResult) siteMatch {
	m := siteMatch{bAll: sitesListed(b), nAll: sitesListed(n), movedTo: map[string]string{}}
	m.moved = movedSites(m.bAll, m.nAll)
	for n, b := range m.moved {
		m.movedTo[b] = n
	}
	return m
}

// baseName is the base run's name of the new run's site.
func (m siteMatch) baseName(site string) string {
	if b, ok := m.moved[site]; ok {
		return b
	}
	return site
}

// diffSites compares two lists of sites (b and n, of the same moment);
// every site each run lists (in match) decides whether a site is new,
// vanished, or the same code moved to another line.
func diffSites(b, n []Site, match siteMatch) []SiteDiff {
	type side struct {
		bytes int64
		count int
		cat   Category
		seen  bool
	}
	bm := map[string]side{}
	for _, s := range b {
		v := bm[s.Site]
		bm[s.Site] = side{satAdd(v.bytes, s.Bytes), v.count + s.Count, s.Category, true}
	}
	nm := map[string]side{}
	for _, s := range n {
		v := nm[s.Site]
		nm[s.Site] = side{satAdd(v.bytes, s.Bytes), v.count + s.Count, s.Category, true}
	}
	bAll, nAll, moved, movedTo := match.bAll, match.nAll, match.moved, match.movedTo
	out := []SiteDiff{}
	add := func(site, baseSite string, bs, ns side) {
		pr, cat := InBoth, ns.cat
		switch {
		case !ns.seen && !nAll[site]:
			pr, cat = OnlyBase, bs.cat
		case !ns.seen:
			cat = bs.cat
		case !bs.seen && baseSite == "" && !bAll[site]:
			pr = OnlyNew
		}
		sd := SiteDiff{Site: site, Presence: pr, Bytes: NewDelta(bs.bytes, ns.bytes),
			Count: NewDelta(int64(bs.count), int64(ns.count)), Category: cat}
		if baseSite != "" && baseSite != site {
			sd.BaseSite = baseSite
		}
		out = append(out, sd)
	}
	done := map[string]bool{} // new names added
	for site, bs := range bm {
		if to, ok := movedTo[site]; ok {
			add(to, site, bs, nm[to])
			done[to] = true
			continue
		}
		add(site, site, bs, nm[site])
		done[site] = true
	}
	for site, ns := range nm {
		if done[site] {
			continue
		}
		add(site, moved[site], bm[moved[site]], ns)
	}
	sort.Slice(out, func(i, j int) bool {
		ai, aj := diffAbs(out[i].Bytes.Delta), diffAbs(out[j].Bytes.Delta)
		if ai != aj {
			return ai > aj
		}
		if out[i].Bytes.New != out[j].Bytes.New {
			return out[i].Bytes.New > out[j].Bytes.New
		}
		return out[i].Site < out[j].Site
	})
	return out
}

func diffAbs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func diffOOM(b, n *OOM) OOMDiff {
	d := OOMDiff{Base: oomBrief(b), New: oomBrief(n)}
	switch {
	case b != nil && n != nil:
		d.Status = OOMBoth
	case n != nil:
		d.Status = OOMAdded
	case b != nil:
		d.Status = OOMFixed
	default:
		d.Status = OOMNone
	}
	return d
}

func oomBrief(o *OOM) *OOMBrief {
	if o == nil {
		return nil
	}
	return &OOMBrief{RequestedBytes: o.RequestedBytes, DeviceFreeBytes: o.DeviceFreeBytes, AllocatedBytes: o.AllocatedBytes,
		Phase: o.Phase, Step: o.Step, Site: o.Site}
}

// diffLeaks matches leak findings by device, kind and site.
func diffLeaks(b, n []Leak) []LeakDiff {
	type key struct {
		dev        int
		kind, site string
	}
	nm := map[key]*Leak{}
	for i := range n {
		k := key{n[i].Device, n[i].Kind, n[i].Site}
		if cur, ok := nm[k]; !ok || n[i].BytesPerStep > cur.BytesPerStep {
			nm[k] = &n[i]
		}
	}
	bmax := map[key]int64{} // the base's largest per step of each finding (one pass: linear)
	for i := range b {
		k := key{b[i].Device, b[i].Kind, b[i].Site}
		bmax[k] = max(bmax[k], b[i].BytesPerStep)
	}
	out := []LeakDiff{}
	used := map[key]bool{}
	for i := range b {
		k := key{b[i].Device, b[i].Kind, b[i].Site}
		if used[k] {
			continue
		}
		used[k] = true
		ld := LeakDiff{Device: k.dev, Kind: k.kind, Site: k.site, Presence: OnlyBase, Confidence: b[i].Confidence}
		var nb int64
		if l, ok := nm[k]; ok {
			ld.Presence, ld.Confidence, nb = InBoth, l.Confidence, l.BytesPerStep
		}
		ld.BytesPerStep = NewDelta(bmax[k], nb)
		out = append(out, ld)
	}
	for i := range n {
		k := key{n[i].Device, n[i].Kind, n[i].Site}
		if used[k] {
			continue
		}
		used[k] = true
		l := nm[k]
		out = append(out, LeakDiff{Device: k.dev, Kind: k.kind, Site: k.site, Presence: OnlyNew, Confidence: l.Confidence,
			BytesPerStep: NewDelta(0, l.BytesPerStep)})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Device != out[j].Device {
			return out[i].Device < out[j].Device
		}
		return diffAbs(out[i].BytesPerStep.Delta) > diffAbs(out[j].BytesPerStep.Delta)
	})
	return out
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
