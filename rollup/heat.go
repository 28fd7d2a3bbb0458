package rollup

import (
	"github.com/torchmem/torchmem/result"
)

// Sizes of the coarse curves kept for the heat map.
const (
	// curvePoints bounds the spans a row keeps (neighbours are merged,
	// keeping their highest peak).
	curvePoints = 64
	// HeatColumns is the number of time columns of the heat map.
	HeatColumns = 96
)

// curve is a row's allocated memory over its run, from the phase spans of
// its result: each span's highest allocated bytes.
type curve struct {
	spans []span
	timed bool // every span has a time
}

// span is one stretch of a curve: events [startEv, endEv], times
// [startUS, endUS] (0 without times) and its highest allocated bytes.
type span struct {
	startUS, endUS int64
	startEv, endEv int
	peak           int64
}

// newCurve keeps at most curvePoints stretches of a device's phase spans.
func newCurve(phases []result.PhaseSpan) curve {
	c := curve{timed: len(phases) > 0}
	per := (len(phases) + curvePoints - 1) / curvePoints
	for i, p := range phases {
		c.timed = c.timed && p.StartUS > 0 && p.EndUS >= p.StartUS
		s := span{startUS: p.StartUS, endUS: p.EndUS, startEv: p.StartEvent, endEv: p.EndEvent, peak: p.PeakAllocatedBytes}
		if i%per != 0 {
			last := &c.spans[len(c.spans)-1]
			last.endUS, last.endEv = max(last.endUS, s.endUS), max(last.endEv, s.endEv)
			last.peak = max(last.peak, s.peak)
			continue
		}
		c.spans = append(c.spans, s)
	}
	return c
}

// Heat is memory over time for every row of a roll-up, in HeatColumns
// columns: the HTML report's ranks×time heat map.
type Heat struct {
	// ByTime: the columns divide StartUS…EndUS, a clock all rows share
	// (one input's, or wall-clock time in every input). Otherwise each
	// row's columns divide its own run, by event.
	ByTime         bool
	StartUS, EndUS int64
	// Cells[i][j] is the highest allocated bytes of row i (the roll-up's
	// Ranks[i]) in column j, −1 where the row has nothing there.
	Cells [][HeatColumns]int64
}

// newHeat lays the rows' curves on a common grid.
func newHeat(rows []Row, curves []curve) *Heat {
	h := &Heat{Cells: make([][HeatColumns]int64, len(rows))}
	timed, wall, oneInput, seen := true, true, true, false
	for i, c := range curves {
		if len(c.spans) == 0 {
			continue
		}
		start, end := c.spans[0].startUS, c.spans[len(c.spans)-1].endUS
		if !seen || start < h.StartUS {
			h.StartUS = start
		}
		if !seen || end > h.EndUS {
			h.EndUS = end
		}
		seen = true
		timed = timed && c.timed
		wall = wall && start >= epochUS
		oneInput = oneInput && rows[i].Input == rows[0].Input
	}
	h.ByTime = seen && timed && (wall || oneInput)
	if !h.ByTime {
		h.StartUS, h.EndUS = 0, 0
	}
	for i, c := range curves {
		cells := &h.Cells[i]
		for j := range cells {
			cells[j] = -1
		}
		if len(c.spans) == 0 {
			continue
		}
		lo, hi := h.StartUS, h.EndUS
		at := func(s span) (int64, int64) { return s.startUS, s.endUS }
		if !h.ByTime {
			lo, hi = int64(c.spans[0].startEv), int64(c.spans[len(c.spans)-1].endEv)
			at = func(s span) (int64, int64) { return int64(s.startEv), int64(s.endEv) }
		}
		for _, s := range c.spans {
			a, b := at(s)
			for j := column(a, lo, hi); j <= column(b, lo, hi); j++ {
				cells[j] = max(cells[j], s.peak)
			}
		}
	}
	return h
}

// column is the column of x on the grid lo…hi.
func column(x, lo, hi int64) int {
	if hi <= lo || x <= lo {
		return 0
	}
	if x >= hi {
		return HeatColumns - 1
	}
	return int(float64(x-lo) / float64(hi-lo) * HeatColumns)
}
