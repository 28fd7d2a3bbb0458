package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// maxSegmentRows bounds the segment table at an OOM; maxPhaseRows the phase
// tables of a page.
const (
	maxSegmentRows = 30
	maxPhaseRows   = 1000
)

// newDeviceView prepares what the page says about one device, listing at
// most rows phase spans and allocs single allocations per moment; many says
// the file has more than one device.
func newDeviceView(i int, d *result.DeviceResult, many bool, rows, allocs int) *deviceView {
	v := &deviceView{Index: i, Name: result.DeviceName(d.Kind, d.Device), D: d, Phases: d.Phases, PhasesTotal: len(d.Phases)}
	if len(v.Phases) > rows {
		v.Phases = v.Phases[:rows]
	}
	v.Option = fmt.Sprintf("%s — peak %s", v.Name, units.FormatBytes(d.Peak.AllocatedBytes))
	if d.OOM != nil {
		v.Option += " — OOM"
		v.Verdict = d.OOM.Verdict
		if many && d.OOM.Verdict != "" {
			v.Verdict = v.Name + ": " + v.Verdict
		}
	}
	v.Headline = filledHeadline(d)
	v.Facts = deviceFacts(d)
	for c := result.Category(0); c < result.NumCategories; c++ {
		row := catRow{Name: categoryLabels[c], Color: categoryColors[c], Peak: d.Peak.Categories[c], AtEnd: d.AtEnd.Categories[c]}
		if d.OOM != nil {
			row.OOM, row.HasOOM = d.OOM.Categories[c], true
		}
		row.PeakShare = pct(row.Peak, d.Peak.Categories.Total())
		v.Cats = append(v.Cats, row)
	}
	if d.OOM != nil {
		v.Segments = layoutSegmentRows(d.OOM.Layout, d.OOM.RequestedBytes)
		v.OOMAllocs = newAllocView("the OOM", d.OOM.Allocations, allocs)
	}
	v.PeakAllocs = newAllocView("the peak", d.PeakAllocations, allocs)
	return v
}

// allocView is the table of single allocations around one moment.
type allocView struct {
	Moment          string // "the peak"
	Live            int
	Largest, Recent []allocRow
}

// allocRow is one allocation as the page shows it.
type allocRow struct {
	Size, Requested  int64
	Category         string
	Allocated, Freed string
	Site             string
	Stack            []string
}

// newAllocView lists at most n of the largest and n/2 of the latest
// allocations of a moment (nil when there are none).
func newAllocView(moment string, at *result.AllocationsAt, n int) *allocView {
	if at == nil || n <= 0 {
		return nil
	}
	v := &allocView{Moment: moment, Live: at.Live}
	row := func(a result.Allocation) allocRow {
		r := allocRow{Size: a.Size, Requested: a.Requested, Category: a.Category.String(), Site: a.Site, Stack: a.Stack, Freed: "live at the end"}
		if a.AllocEvent < 0 {
			r.Allocated = "before the recording"
		} else {
			r.Allocated = fmt.Sprintf("%s, event %d", phaseAt(a.Phase, a.Step)[3:], a.AllocEvent)
		}
		if a.FreeEvent >= 0 {
			r.Freed = fmt.Sprintf("event %d", a.FreeEvent)
		}
		return r
	}
	for _, a := range at.Largest[:min(len(at.Largest), n)] {
		v.Largest = append(v.Largest, row(a))
	}
	for _, a := range at.Recent[:min(len(at.Recent), max(n/2, 1))] {
		v.Recent = append(v.Recent, row(a))
	}
	return v
}

// phaseAt names a phase and step for a sentence: "in backward (step 3)".
func phaseAt(p result.Phase, step int) string {
	if p == "" || p == result.PhaseUnknown {
		if step > 0 {
			return fmt.Sprintf("in step %d", step)
		}
		return "in an unknown phase"
	}
	if step > 0 {
		return fmt.Sprintf("in %s (step %d)", p, step)
	}
	return "in " + string(p)
}

// filledHeadline says what filled memory, at the OOM when there is one and
// at the peak otherwise.
func filledHeadline(d *result.DeviceResult) string {
	cats, total, when := d.Peak.Categories, d.Peak.AllocatedBytes, "At the peak"
	where := phaseAt(d.Peak.Phase, d.Peak.Step)
	if d.NoHistory {
		when, where = "At the dump", "no allocation history"
	}
	if d.OOM != nil {
		cats, total, when = d.OOM.Categories, d.OOM.AllocatedBytes, "At the OOM"
		where = phaseAt(d.OOM.Phase, d.OOM.Step)
	}
	if cats.Total() > total {
		total = cats.Total()
	}
	if total <= 0 {
		return "No memory was allocated on this device while it was recorded."
	}
	order := make([]result.Category, 0, result.NumCategories)
	for c := result.Category(0); c < result.NumCategories; c++ {
		if cats[c] > 0 {
			order = append(order, c)
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return cats[order[i]] > cats[order[j]] })
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s allocated, %s)", when, units.FormatBytes(total), where)
	if len(order) == 0 {
		b.WriteString(", no block could be classified.")
		return b.String()
	}
	part := func(c result.Category) string {
		return fmt.Sprintf("%s %s (%s)", categoryLabels[c], units.FormatBytes(cats[c]), pct(cats[c], total))
	}
	fmt.Fprintf(&b, ", %s held the most", part(order[0]))
	if len(order) > 1 {
		rest := make([]string, 0, 2)
		for _, c := range order[1:min(len(order), 3)] {
			rest = append(rest, part(c))
		}
		fmt.Fprintf(&b, "; then %s", strings.Join(rest, " and "))
	}
	b.WriteString(".")
	return b.String()
}

func deviceFacts(d *result.DeviceResult) []fact {
	f := []fact{
		{"peak allocated", fmt.Sprintf("%s %s", units.FormatBytes(d.Peak.AllocatedBytes), phaseAt(d.Peak.Phase, d.Peak.Step))},
		{"reserved at peak", units.FormatBytes(d.Peak.ReservedBytes)},
		{"at end", fmt.Sprintf("%s allocated, %s reserved", units.FormatBytes(d.AtEnd.AllocatedBytes), units.FormatBytes(d.AtEnd.ReservedBytes))},
	}
	if d.Peak.ReservedUnknown { // the file states no reserved figure: say so, not 0 B
		f[1].Value = "not recorded in this file"
		f[2].Value = units.FormatBytes(d.AtEnd.AllocatedBytes) + " allocated"
	}
	if d.NoHistory {
		f = []fact{{"at the dump", dumpState(*d) + " (no allocation history)"}}
		if c := cachedNote(d.AtEnd.Fragmentation); c != "" {
			f = append(f, fact{"cached", c})
		}
	}
	if d.Capacity > 0 {
		f = append(f, fact{"device capacity", units.FormatBytes(d.Capacity)})
	}
	if o := d.OOM; o != nil {
		f = append(f, fact{"OOM request", fmt.Sprintf("%s with %s free on the device", units.FormatBytes(o.RequestedBytes), units.FormatBytes(o.DeviceFreeBytes))})
	}
	return f
}

// layoutSegmentRows lists the segments of the state rebuilt at the OOM that
// have free pieces, the one with the largest first.
func layoutSegmentRows(layout []result.SegmentState, request int64) []segmentRow {
	var rows []segmentRow
	for _, g := range layout {
		r := segmentRow{Address: g.Address, Total: g.Size, Expandable: g.Expandable}
		for _, b := range g.Blocks {
			if !b.Free() {
				r.Allocated += b.Size
				continue
			}
			r.Free += b.Size
			r.FreeBlocks++
			r.LargestFree = max(r.LargestFree, b.Size)
		}
		if r.FreeBlocks == 0 {
			continue
		}
		r.FitsTheRequest = r.LargestFree >= request
		rows = append(rows, r)
	}
	return largestFirst(rows)
}

// largestFirst orders segment rows by their largest free block and keeps
// the first maxSegmentRows.
func largestFirst(rows []segmentRow) []segmentRow {
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].LargestFree != rows[j].LargestFree {
			return rows[i].LargestFree > rows[j].LargestFree
		}
		return rows[i].Address < rows[j].Address
	})
	if len(rows) > maxSegmentRows {
		rows = rows[:maxSegmentRows]
	}
	return rows
}
