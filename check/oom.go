package check

import (
	"fmt"
	"strings"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// checkOOM is the first check of every run: did a device run out of
// memory? One failed item (skipped with allowOOM) per device with an OOM,
// its verdict as the message and the request's site first among its sites;
// one passed item when none did. The item points at the failed request's
// frame (File, Line).
func checkOOM(devs []*result.DeviceResult, allowOOM bool) []Item {
	var items []Item
	for _, d := range devs {
		o := d.OOM
		if o == nil {
			continue
		}
		it := Item{Name: fmt.Sprintf("device %d: out of memory", d.Device), Kind: CheckKindOOM, Key: CheckKeyOOM,
			Device: d.Device, Status: CheckFail, Actual: o.RequestedBytes, Limit: o.DeviceFreeBytes}
		verdict := o.Verdict
		if verdict == "" {
			verdict = fmt.Sprintf("Out of memory in %s: %s requested with %s free on the device.", o.Phase, units.FormatBytes(o.RequestedBytes), units.FormatBytes(o.DeviceFreeBytes))
		}
		it.Message = fmt.Sprintf("device %d: %s", d.Device, verdict)
		if allowOOM {
			it.Status = CheckSkip
			it.Message = fmt.Sprintf("device %d (allowed by --allow-oom): %s", d.Device, verdict)
		}
		it.File, it.Line = o.SiteFile, o.SiteLine
		it.Sites = largestSites(o.TopSites, -1)
		items = append(items, it)
	}
	if len(items) == 0 && len(devs) > 0 {
		msg := "no device ran out of memory"
		if len(devs) == 1 {
			msg = fmt.Sprintf("device %d did not run out of memory", devs[0].Device)
		}
		items = append(items, Item{Name: "out of memory", Kind: CheckKindOOM, Key: CheckKeyOOM, Device: -1, Status: CheckPass, Message: msg})
	}
	return items
}

// budgetSites returns the largest sites at the moment a budget measures:
// the peak for "peak" and a category (that category's sites), the phase's
// peak for "phase:NAME"; none for the other keys.
func budgetSites(d *result.DeviceResult, key string) []CheckSite {
	if key == BudgetPeak {
		return largestSites(sitesAtPeak(d), -1)
	}
	if c, ok := result.ParseCategory(key); ok {
		return largestSites(sitesAtPeak(d), c)
	}
	if ph, ok := strings.CutPrefix(key, BudgetPhasePrefix); ok {
		if pp := d.PhasePeakOf(result.Phase(ph)); pp != nil {
			return largestSites(pp.TopSites, -1)
		}
	}
	return nil
}
