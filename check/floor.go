package check

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// Floor is the least growth over the baseline that a regression check
// counts: growth up to it is noise, whatever its share of the baseline. A
// category of 80 KiB that becomes 160 KiB grew by 100% yet by nothing a
// device would notice; relative tolerances alone fail such a run. The
// floor of a device is the larger of Bytes and PercentOfPeak of the
// baseline's peak on that device.
type Floor struct {
	Bytes         int64   `json:"bytes"`
	PercentOfPeak float64 `json:"percent_of_peak"`
}

// DefaultFloor is check's noise floor unless told otherwise: the larger of
// 16 MiB and 1% of the baseline's peak. Two runs of one program differ by
// small buffers (a batch's input of a few KiB, a caching allocator's
// 2 MiB rounding of a segment, an extra handle's workspace), well under
// both; a real regression (a layer, a longer sequence, a larger batch)
// moves hundreds of MiB. Budgets (--budget) have no floor.
var DefaultFloor = Floor{Bytes: 16 << 20, PercentOfPeak: 1}

// Bounds of what a gate may be told: a tolerance beyond maxTolerancePercent
// (the measure may grow elevenfold) or a floor beyond maxFloorPercent of
// the peak lets every regression pass; a budget says that better.
const (
	maxTolerancePercent = 1000
	maxFloorPercent     = 100
)

// ParseFloor reads a noise floor: a size ("16MiB"), a share of the
// baseline's peak ("1%"), or both separated by a comma ("16MiB,1%": the
// larger of the two). "0" counts every growth.
func ParseFloor(s string) (Floor, error) {
	var f Floor
	bad := func(why string) (Floor, error) {
		return Floor{}, fmt.Errorf("floor %q: %s", s, why)
	}
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return bad("want a size like 16MiB, a percentage of the peak like 1%, or both: 16MiB,1%")
	}
	sizes, pcts := 0, 0
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if v, ok := strings.CutSuffix(p, "%"); ok {
			pct, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || math.IsNaN(pct) || pct < 0 || pct > maxFloorPercent {
				return bad(fmt.Sprintf("want a percentage of the peak from 0%% to %d%%", maxFloorPercent))
			}
			f.PercentOfPeak, pcts = pct, pcts+1
			continue
		}
		n, err := units.ParseBytes(p)
		if err != nil || n > result.MaxFigureBytes {
			return bad("want a size like 16MiB (at most 1 PiB) or a percentage of the peak like 1%")
		}
		f.Bytes, sizes = n, sizes+1
	}
	if sizes > 1 || pcts > 1 {
		return bad("give at most one size and one percentage, like 16MiB,1%")
	}
	return f, nil
}

// Of is the floor in bytes against a baseline peak.
func (f Floor) Of(peak int64) int64 {
	share := int64(0)
	if peak > 0 && f.PercentOfPeak > 0 {
		share = int64(math.Min(math.Floor(float64(peak)*f.PercentOfPeak/100), result.MaxFigureBytes))
	}
	return max(f.Bytes, share)
}

// String writes the floor for a verdict: "16.0 MiB or 1% of the baseline's
// peak, the larger".
func (f Floor) String() string {
	pct := strconv.FormatFloat(f.PercentOfPeak, 'g', -1, 64) + "% of the baseline's peak"
	switch {
	case f.Bytes > 0 && f.PercentOfPeak > 0:
		return "the larger of " + units.FormatBytes(f.Bytes) + " and " + pct
	case f.PercentOfPeak > 0:
		return pct
	}
	return units.FormatBytes(f.Bytes)
}
