package rollup

import (
	"cmp"
	"math"
	"slices"

	"github.com/torchmem/torchmem/result"
)

// What makes a row stand out. A robust score alone flags tiny differences
// when most ranks are identical (the spread is then 0), and a share alone
// flags ordinary noise on a few ranks: a row stands out when both hold.
const (
	// minOutlierRows: with fewer rows there is no "the others" to stand
	// apart from.
	minOutlierRows = 3
	// robustZ is how many robust standard deviations (1.4826 × the median
	// absolute deviation, the usual consistency factor) a row must be off.
	robustZ = 3.5
	// peakShare is how far off the median peak a peak must be (10%): ranks
	// of one job differ by a few percent from uneven batches and timing.
	peakShare = 0.10
	// mixDistance is how much of the peak must be of other categories
	// than on the median rank (15 points of share) for a category-mix
	// outlier.
	mixDistance = 0.15
	// spreadFloor is the smallest spread assumed, as a share of the median
	// (2%) or, for the mix, of the whole peak.
	spreadFloor = 0.02
	// maxOutliers is how many outliers a roll-up lists, the farthest: at
	// thousands of ranks a fault shared by many would list them all.
	maxOutliers = 16
)

// outliers finds the rows whose peak or category mix stands apart,
// largest deviation first (peaks before mixes at equal deviation): the
// maxOutliers farthest, and how many more there are.
func outliers(rows []Row) ([]Outlier, int) {
	out := []Outlier{}
	if len(rows) < minOutlierRows {
		return out, 0
	}
	peaks := make([]float64, len(rows))
	for i, r := range rows {
		peaks[i] = float64(r.PeakBytes)
	}
	med := medianF(peaks)
	spread := max(1.4826*mad(peaks, med), spreadFloor*med)
	type scored struct {
		o   Outlier
		dev float64
	}
	var found []scored
	for i, r := range rows {
		dev := math.Abs(peaks[i] - med)
		if med > 0 && dev >= peakShare*med && dev > robustZ*spread {
			found = append(found, scored{Outlier{Input: r.Input, Path: r.Path, Rank: r.Rank, Device: r.Device, Kind: OutlierPeak,
				PeakBytes: r.PeakBytes, MedianPeakBytes: int64(med), Ratio: round4(peaks[i] / med)}, dev / med})
		}
	}
	shares := make([][result.NumCategories]float64, len(rows))
	for i, r := range rows {
		shares[i] = shareOf(r.PeakCategories)
	}
	var medShare [result.NumCategories]float64
	col := make([]float64, len(rows))
	for c := range medShare {
		for i := range rows {
			col[i] = shares[i][c]
		}
		medShare[c] = medianF(col)
	}
	dist := make([]float64, len(rows))
	for i := range rows {
		for c := range medShare {
			dist[i] += math.Abs(shares[i][c]-medShare[c]) / 2
		}
	}
	dmed := medianF(dist)
	dspread := max(1.4826*mad(dist, dmed), spreadFloor)
	for i, r := range rows {
		if r.PeakCategories.Total() == 0 || dist[i] < mixDistance || dist[i]-dmed <= robustZ*dspread {
			continue
		}
		most := 0
		for c := range medShare {
			if math.Abs(shares[i][c]-medShare[c]) > math.Abs(shares[i][most]-medShare[most]) {
				most = c
			}
		}
		cat := result.Category(most)
		found = append(found, scored{Outlier{Input: r.Input, Path: r.Path, Rank: r.Rank, Device: r.Device, Kind: OutlierMix,
			PeakBytes: r.PeakBytes, MedianPeakBytes: int64(med), Ratio: round4(safeRatio(peaks[i], med)),
			Distance: round4(dist[i]), Category: &cat, Share: round4(shares[i][most]), MedianShare: round4(medShare[most])}, dist[i]})
	}
	slices.SortStableFunc(found, func(a, b scored) int { return cmp.Compare(b.dev, a.dev) })
	for _, f := range found[:min(len(found), maxOutliers)] {
		out = append(out, f.o)
	}
	return out, len(found) - len(out)
}

// shareOf is each category's share of the total.
func shareOf(c result.Categories) [result.NumCategories]float64 {
	var s [result.NumCategories]float64
	if t := c.Total(); t > 0 {
		for i, v := range c {
			s[i] = float64(v) / float64(t)
		}
	}
	return s
}

// median of integers, as a float (the mean of the middle two for an even count).
func median(v []int64) float64 {
	f := make([]float64, len(v))
	for i, x := range v {
		f[i] = float64(x)
	}
	return medianF(f)
}

// medianF is the median of v (0 when empty); v is not changed.
func medianF(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// mad is the median absolute deviation of v from med.
func mad(v []float64, med float64) float64 {
	d := make([]float64, len(v))
	for i, x := range v {
		d[i] = math.Abs(x - med)
	}
	return medianF(d)
}

func safeRatio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// round4 keeps four decimals: ratios and shares read the same in JSON
// whichever way they were computed.
func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// epochUS is 2001-01-01 in microseconds since the epoch: times below it are
// not on a wall clock (a trace relative to its own start).
const epochUS = 978_307_200_000_000

// firstOOM counts the rows that ran out of memory and picks the first: by
// time when every OOM has one on a clock the files share (one input's
// clock, or wall-clock microseconds since the epoch in all), else the
// lowest rank's (then device, then input).
func firstOOM(rows []Row) (int, *FirstOOM) {
	var ooms []*Row
	for i := range rows {
		if rows[i].OOM != nil {
			ooms = append(ooms, &rows[i])
		}
	}
	if len(ooms) == 0 {
		return 0, nil
	}
	timed, wall, oneInput := true, true, true
	for _, r := range ooms {
		timed = timed && r.OOM.TimeUS > 0
		wall = wall && r.OOM.TimeUS >= epochUS
		oneInput = oneInput && r.Input == ooms[0].Input
	}
	byTime := timed && (wall || oneInput)
	first := ooms[0] // rows are ordered by rank, device, input
	by := "rank"
	if byTime {
		by = "time"
		for _, r := range ooms[1:] {
			if r.OOM.TimeUS < first.OOM.TimeUS {
				first = r
			}
		}
	}
	return len(ooms), &FirstOOM{Input: first.Input, Path: first.Path, Rank: first.Rank, Device: first.Device, By: by, RowOOM: *first.OOM}
}
