package rollup

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// Limits of what a Builder keeps per row and in all.
const (
	// rowSites is how many of a device's largest sites count for CommonSites.
	rowSites = 3
	// rowLeaks is how many leak findings a row keeps.
	rowLeaks = 3
	// maxSites bounds the distinct sites counted over all rows (a hostile
	// stream of summaries could name millions).
	maxSites = 100_000
	// maxNotes bounds the notes about duplicate ranks and empty inputs.
	maxNotes = 8
)

// Builder rolls up results one at a time, in input order. It keeps a row
// and a coarse curve per device and drops the rest, so each Result may be
// discarded once added. Files that torchmem record wrote for one process
// (ProcessOf) make one rank: the preferred file's rows, with the others
// listed as SameProcess.
type Builder struct {
	inputs   int
	rows     []Row
	curves   []curve // curves[i] belongs to rows[i]
	empty    []string
	ordered  int  // inputs whose rank is their order
	siteCaps bool // maxSites was reached
	// procs is the file kept for each recording process, also the other
	// files of the process that the kept input's rows list, and dropped the
	// inputs another file of their process replaced.
	procs   map[procKey]procFile
	also    map[int][]SameProcess
	dropped map[int]bool
	// unreadable are the inputs that could not be read.
	unreadable []Unreadable
}

// procKey tells recording processes apart: by rank and process id.
type procKey struct{ rank, pid int }

// procFile is what the Builder keeps of a file of a recording process.
type procFile struct {
	input     int
	kind      FileKind
	path      string
	allocated int64       // at the end, on its devices
	ooms      []deviceOOM // its devices' OOMs
}

// deviceOOM identifies an OOM: its device, time and request.
type deviceOOM struct {
	device          int
	timeUS, request int64
}

// siteTally counts one site over the rows.
type siteTally struct {
	category result.Category
	bytes    []int64
}

// NewBuilder starts an empty roll-up.
func NewBuilder() *Builder {
	return &Builder{procs: map[procKey]procFile{}, also: map[int][]SameProcess{}, dropped: map[int]bool{}}
}

// Add takes the next input's result. Inputs are numbered in the order they
// are added; rows are made for the input's accelerator devices (its CPU
// device too when it has nothing else).
func (b *Builder) Add(r *result.Result) {
	idx := b.inputs
	b.inputs++
	rank, from := Identify(r.Input, idx)
	if from == FromOrder {
		b.ordered++
	}
	devs := accelerators(r.Devices)
	if len(devs) == 0 {
		b.empty = append(b.empty, r.Input.Path)
		return
	}
	var rows []Row
	for _, d := range devs {
		row := Row{Input: idx, Path: r.Input.Path, Rank: rank, RankFrom: from, Device: d.Device, Kind: d.Kind,
			CapacityBytes: d.Capacity, PeakBytes: d.Peak.AllocatedBytes, PeakReservedBytes: d.Peak.ReservedBytes,
			PeakPhase: d.Peak.Phase, PeakStep: d.Peak.Step, PeakTimeUS: d.Peak.TimeUS,
			PeakCategories: d.Peak.Categories, Leaks: []RowLeak{}, TopSites: []result.Site{}}
		row.Largest = largestCategory(d.Peak.Categories)
		if o := d.OOM; o != nil {
			row.OOM = &RowOOM{RequestedBytes: o.RequestedBytes, DeviceFreeBytes: o.DeviceFreeBytes,
				AllocatedBytes: o.AllocatedBytes, Phase: o.Phase, Step: o.Step, TimeUS: o.TimeUS, Site: o.Site,
				Fragmented: o.Fragmentation.Fragmented}
		}
		row.Leaks, row.LeakCount = deviceLeaks(r.Leaks, d.Device)
		row.TopSites = append(row.TopSites, d.TopSites[:min(len(d.TopSites), rowSites)]...)
		rows = append(rows, row)
	}
	if p, ok := ProcessOf(r.Input.Path); ok && p.Rank == rank { // unless the file states another rank
		for i := range rows {
			rows[i].Pid = p.Pid
		}
		if !b.keepProcess(p, newProcFile(idx, p.Kind, r, devs)) {
			return
		}
	}
	for _, row := range rows {
		b.rows = append(b.rows, row)
		b.curves = append(b.curves, newCurve(devPhases(devs, row.Device)))
	}
}

// Fail lists an input that could not be read, with why (one line; its
// path need not be in it). It takes no input number: the roll-up's inputs
// are the results added.
func (b *Builder) Fail(path, why string) {
	u := Unreadable{Path: path, Error: why}
	if r, ok := rankFromPath(path); ok {
		u.Rank = &r
	}
	b.unreadable = append(b.unreadable, u)
}

// AddUnreadable lists an input that an earlier roll-up could not read.
func (b *Builder) AddUnreadable(u Unreadable) { b.unreadable = append(b.unreadable, u) }

// Results is how many results were added.
func (b *Builder) Results() int { return b.inputs }

// keepProcess files f under its process p and says whether its rows are
// the process's: the first file of a process is, and a later one replaces
// the kept one when preferred (an OOM snapshot over the snapshot at exit);
// the file not kept is listed with the kept one's rows.
func (b *Builder) keepProcess(p Process, f procFile) bool {
	key := procKey{p.Rank, p.Pid}
	kept, seen := b.procs[key]
	if !seen {
		b.procs[key] = f
		return true
	}
	if kept.path == f.path { // the same file given twice: two inputs, as any other
		return true
	}
	if f.kind.preference() >= kept.kind.preference() {
		b.also[kept.input] = append(b.also[kept.input], f.sameAs(kept))
		return false
	}
	b.dropped[kept.input] = true
	b.also[f.input] = append(b.also[kept.input], kept.sameAs(f))
	delete(b.also, kept.input)
	b.procs[key] = f
	return true
}

func newProcFile(idx int, kind FileKind, r *result.Result, devs []*result.DeviceResult) procFile {
	f := procFile{input: idx, kind: kind, path: r.Input.Path}
	for _, d := range devs {
		f.allocated += d.AtEnd.AllocatedBytes
		if d.OOM != nil {
			f.ooms = append(f.ooms, deviceOOM{d.Device, d.OOM.TimeUS, d.OOM.RequestedBytes})
		}
	}
	return f
}

// sameAs says what f is beside kept, the file kept for its process: a
// snapshot whose history holds the OOM of kept (an OOM snapshot) was
// dumped after that OOM.
func (f procFile) sameAs(kept procFile) SameProcess {
	s := SameProcess{Input: f.input, Path: f.path, What: WhatSnapshot, AllocatedBytes: f.allocated}
	switch {
	case f.kind == KindTrace:
		s.What = WhatTrace
	case kept.kind == KindOOMSnapshot:
		for _, o := range kept.ooms {
			if slices.Contains(f.ooms, o) {
				s.What = WhatAfterOOM
			}
		}
	}
	return s
}

// devPhases are the phase spans of device dev.
func devPhases(devs []*result.DeviceResult, dev int) []result.PhaseSpan {
	for _, d := range devs {
		if d.Device == dev {
			return d.Phases
		}
	}
	return nil
}

// accelerators are the devices a roll-up compares: every device but the
// CPU's (a chrome trace's host allocations), unless the CPU is all there is.
func accelerators(devs []result.DeviceResult) []*result.DeviceResult {
	var acc, cpu []*result.DeviceResult
	for i := range devs {
		if devs[i].Kind == string(snapshot.DeviceCPU) {
			cpu = append(cpu, &devs[i])
		} else {
			acc = append(acc, &devs[i])
		}
	}
	if len(acc) == 0 {
		return cpu
	}
	return acc
}

// largestCategory is the category with the most bytes (the first on ties).
func largestCategory(c result.Categories) CategoryBytes {
	best := CategoryBytes{Category: result.Unknown}
	for i, v := range c {
		if v > best.Bytes {
			best = CategoryBytes{Category: result.Category(i), Bytes: v}
		}
	}
	return best
}

// deviceLeaks are the largest leak findings of a device and how many it has.
func deviceLeaks(leaks []result.Leak, device int) ([]RowLeak, int) {
	var out []RowLeak
	for _, l := range leaks {
		if l.Device == device {
			out = append(out, RowLeak{Kind: l.Kind, Site: l.Site, BytesPerStep: l.BytesPerStep, Confidence: l.Confidence})
		}
	}
	n := len(out)
	slices.SortStableFunc(out, func(a, b RowLeak) int { return cmp.Compare(b.BytesPerStep, a.BytesPerStep) })
	if out == nil {
		out = []RowLeak{}
	}
	return out[:min(n, rowLeaks)], n
}

// tallySites counts the kept rows' largest sites, in input order.
func (b *Builder) tallySites() map[string]*siteTally {
	sites := map[string]*siteTally{}
	for _, row := range b.rows {
		if b.dropped[row.Input] {
			continue
		}
		for _, s := range row.TopSites {
			t := sites[s.Site]
			if t == nil {
				if len(sites) >= maxSites {
					b.siteCaps = true
					continue
				}
				t = &siteTally{category: s.Category}
				sites[s.Site] = t
			}
			t.bytes = append(t.bytes, s.Bytes)
		}
	}
	return sites
}

// Rollup finishes the roll-up of the results added so far.
func (b *Builder) Rollup() *Rollup {
	ru := &Rollup{Inputs: b.inputs, Ranks: b.rows, Outliers: []Outlier{}, CommonSites: []CommonSite{}, Notes: []string{},
		Unreadable: slices.Clip(b.unreadable)}
	if ru.Unreadable == nil {
		ru.Unreadable = []Unreadable{}
	}
	order := make([]int, 0, len(b.rows))
	for i, row := range b.rows {
		if !b.dropped[row.Input] {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(i, j int) int {
		x, y := &b.rows[i], &b.rows[j]
		return cmp.Or(cmp.Compare(x.Rank, y.Rank), cmp.Compare(x.Device, y.Device), cmp.Compare(x.Input, y.Input))
	})
	rows := make([]Row, len(order))
	curves := make([]curve, len(order))
	for k, i := range order {
		rows[k], curves[k] = b.rows[i], b.curves[i]
		if also := b.also[rows[k].Input]; len(also) > 0 {
			rows[k].SameProcess = slices.SortedFunc(slices.Values(also), func(x, y SameProcess) int { return cmp.Compare(x.Input, y.Input) })
		}
	}
	ru.Ranks = rows
	if ru.Ranks == nil {
		ru.Ranks = []Row{}
	}
	if len(rows) > 0 {
		peaks := make([]int64, len(rows))
		w := 0
		for i, r := range rows {
			peaks[i] = r.PeakBytes
			if r.PeakBytes > rows[w].PeakBytes {
				w = i
			}
		}
		ru.Worst = &Worst{Input: rows[w].Input, Path: rows[w].Path, Rank: rows[w].Rank, Device: rows[w].Device, PeakBytes: rows[w].PeakBytes}
		ru.MedianPeakBytes = int64(median(peaks))
		others := median(slices.Delete(peaks, w, w+1))
		ru.OthersMedianPeakBytes = int64(others)
		switch {
		case len(rows) == 1 && rows[0].PeakBytes > 0:
			ru.Imbalance = 1
		case others > 0:
			ru.Imbalance = round4(float64(rows[w].PeakBytes) / others)
		}
		ru.Outliers, ru.OutliersMore = outliers(rows)
	}
	ru.OOMs, ru.FirstOOM = firstOOM(rows)
	ru.CommonSites = b.commonSites(b.tallySites(), len(rows))
	ru.Notes = b.notes(rows)
	ru.Heat = newHeat(rows, curves)
	return ru
}

// commonSites are the sites among the largest on at least half of n rows
// (and on two at least), on most rows first, then by their largest bytes.
func (b *Builder) commonSites(sites map[string]*siteTally, n int) []CommonSite {
	out := []CommonSite{}
	for site, t := range sites {
		if len(t.bytes) < 2 || 2*len(t.bytes) < n {
			continue
		}
		vals := slices.Clone(t.bytes)
		out = append(out, CommonSite{Site: site, Category: t.category, Ranks: len(vals),
			MedianBytes: int64(median(vals)), MaxBytes: slices.Max(vals)})
	}
	slices.SortFunc(out, func(x, y CommonSite) int {
		return cmp.Or(cmp.Compare(y.Ranks, x.Ranks), cmp.Compare(y.MaxBytes, x.MaxBytes), cmp.Compare(x.Site, y.Site))
	})
	return out[:min(len(out), 5)]
}

// notes say what limits trust in the roll-up.
func (b *Builder) notes(rows []Row) []string {
	var notes []string
	if b.ordered > 0 && b.inputs > 1 {
		notes = append(notes, fmt.Sprintf("%d of %d inputs state no rank (no distributedInfo, no rank in the file name): their rank is their place among the inputs", b.ordered, b.inputs))
	}
	var dups []string
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].Rank == rows[i].Rank && rows[j].Device == rows[i].Device {
			j++
		}
		if j-i > 1 {
			dups = append(dups, fmt.Sprintf("rank %d device %d appears in %d inputs (%s and %s)", rows[i].Rank, rows[i].Device, j-i,
				units.OneLine(rows[i].Path), units.OneLine(rows[i+1].Path)))
		}
		i = j
	}
	notes = append(notes, capped(dups, "more ranks appear in several inputs")...)
	var empty []string
	for _, p := range b.empty {
		empty = append(empty, fmt.Sprintf("%s: no device memory in the file; not in the table", units.OneLine(p)))
	}
	notes = append(notes, capped(empty, "more inputs have no device memory")...)
	if b.siteCaps {
		notes = append(notes, fmt.Sprintf("more than %d distinct allocation sites: common sites counted among the first %d", maxSites, maxSites))
	}
	if notes == nil {
		notes = []string{}
	}
	return notes
}

// capped keeps maxNotes notes and says how many more there were.
func capped(notes []string, more string) []string {
	if len(notes) <= maxNotes {
		return notes
	}
	return append(notes[:maxNotes:maxNotes], fmt.Sprintf("%d %s", len(notes)-maxNotes, more))
}
