package diff

import (
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// DiffSchemaID is the JSON schema identifier of Result.
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
func NewDelta(base, new int64) Delta {
	return Delta{Base: base, New: new, Delta: units.SatSub(new, base)}
}

// Percent is the change relative to the base in percent; ok is false when
// the base is 0 (the change has no finite ratio).
func (d Delta) Percent() (pct float64, ok bool) {
	if d.Base == 0 {
		return 0, false
	}
	return float64(d.Delta) * 100 / float64(d.Base), true
}

// Result is a semantic diff of two analyses of related runs: peaks,
// categories, phases, steps, sites, OOMs and leaks, per device.
type Result struct {
	Schema  string       `json:"schema"`
	Base    result.Input `json:"base"`
	New     result.Input `json:"new"`
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
	Base result.Phase `json:"base"`
	New  result.Phase `json:"new"`
}

// CategoryDiff compares one category at the peak and at the end.
type CategoryDiff struct {
	Category result.Category `json:"category"`
	Peak     Delta           `json:"peak"`
	End      Delta           `json:"end"`
}

// PhaseDiff compares the highest peak of one phase.
type PhaseDiff struct {
	Phase    result.Phase `json:"phase"`
	Presence Presence     `json:"presence"`
	Peak     Delta        `json:"peak"`
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
	Category result.Category `json:"category"`
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
	RequestedBytes  int64        `json:"requested_bytes"`
	DeviceFreeBytes int64        `json:"device_free_bytes"`
	AllocatedBytes  int64        `json:"allocated_bytes"`
	Phase           result.Phase `json:"phase"`
	Step            int          `json:"step"`
	Site            string       `json:"site"`
}

// LeakDiff is a leak finding of one run matched (by device, kind and site)
// against the other.
type LeakDiff struct {
	Device       int               `json:"device"`
	Kind         string            `json:"kind"`
	Site         string            `json:"site"`
	Presence     Presence          `json:"presence"`
	BytesPerStep Delta             `json:"bytes_per_step"`
	Confidence   result.Confidence `json:"confidence"`
}
