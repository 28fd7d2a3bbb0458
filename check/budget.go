package check

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/diff"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// CheckSchemaID is the JSON schema identifier of Result.
const CheckSchemaID = "torchmem.check/v1"

// Budget keys besides the category names and "phase:NAME".
const (
	BudgetPeak          = "peak"            // allocated bytes at the peak
	BudgetEnd           = "end"             // allocated bytes at the end (the dump)
	BudgetGrowthPerStep = "growth_per_step" // the largest Leak.BytesPerStep
	BudgetLeaks         = "leaks"           // the number of medium/high-confidence leaks
	// BudgetPhasePrefix starts a phase budget: "phase:forward" bounds the
	// highest peak of the forward phase over all steps.
	BudgetPhasePrefix = "phase:"
)

// Budget is an upper bound on one measure of a run.
type Budget struct {
	// Key is what is bounded: "peak", "end", a category name (at the peak),
	// "phase:NAME", "growth_per_step" or "leaks".
	Key string `json:"key"`
	// Limit is in bytes, or a count for "leaks".
	Limit int64 `json:"limit"`
}

// BudgetKeys lists every valid budget key, in the order checks are run.
func BudgetKeys() []string {
	keys := []string{BudgetPeak, BudgetEnd}
	for c := result.Category(0); c < result.NumCategories; c++ {
		keys = append(keys, c.String())
	}
	for _, ph := range budgetPhases {
		keys = append(keys, BudgetPhasePrefix+string(ph))
	}
	return append(keys, BudgetGrowthPerStep, BudgetLeaks)
}

var budgetPhases = []result.Phase{result.PhaseData, result.PhaseForward, result.PhaseBackward, result.PhaseZeroGrad, result.PhaseOptimizer, result.PhaseUnknown}

// budgetRank orders budgets like BudgetKeys; −1 for an unknown key.
func budgetRank(key string) int {
	for i, k := range BudgetKeys() {
		if k == key {
			return i
		}
	}
	return -1
}

// ParseBudget reads "KEY=VALUE", e.g. "peak=20GiB", "activation=8GiB",
// "phase:forward=12GiB", "growth_per_step=0", "leaks=0".
func ParseBudget(s string) (Budget, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return Budget{}, fmt.Errorf("budget %q: want KEY=VALUE, e.g. peak=20GiB", s)
	}
	return NewBudget(strings.TrimSpace(k), strings.TrimSpace(v))
}

// NewBudget validates a budget key and parses its value: a size ("20GiB",
// "512MiB", "0"; GB is 10^9, GiB 2^30) or, for "leaks", a count.
func NewBudget(key, value string) (Budget, error) {
	if budgetRank(key) < 0 {
		return Budget{}, fmt.Errorf("unknown budget %q: want one of %s", key, strings.Join(BudgetKeys(), ", "))
	}
	if key == BudgetLeaks {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n < 0 {
			return Budget{}, fmt.Errorf("budget %s=%q: want a count like 0", key, value)
		}
		return Budget{Key: key, Limit: n}, nil
	}
	n, err := units.ParseBytes(value)
	if err != nil {
		return Budget{}, fmt.Errorf("budget %s=%q: %v", key, value, err)
	}
	return Budget{Key: key, Limit: n}, nil
}

// Tolerance is how much a measure may grow over the baseline: a share of
// the baseline (Percent) or, when Bytes is set, an absolute amount.
type Tolerance struct {
	Percent float64 `json:"percent"`
	Bytes   int64   `json:"bytes,omitempty"`
}

// ParseTolerance reads "5%" or "5" (percent of the baseline) or a size such
// as "256MiB" (absolute growth).
func ParseTolerance(s string) (Tolerance, error) {
	t := strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(t, "%"); ok {
		t = strings.TrimSpace(p)
	}
	if f, err := strconv.ParseFloat(t, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if f < 0 || math.IsNaN(f) || f > maxTolerancePercent {
			return Tolerance{}, fmt.Errorf("tolerance %q: want a percentage from 0%% to %d%% like 5%% (more lets a measure grow %d-fold: set a --budget instead)",
				s, maxTolerancePercent, maxTolerancePercent/100+1)
		}
		return Tolerance{Percent: f}, nil
	}
	if strings.HasSuffix(strings.TrimSpace(s), "%") {
		return Tolerance{}, fmt.Errorf("tolerance %q: want a percentage like 5%% or a size like 256MiB", s)
	}
	n, err := units.ParseBytes(t)
	if err != nil || n > result.MaxFigureBytes {
		return Tolerance{}, fmt.Errorf("tolerance %q: want a percentage like 5%% or a size like 256MiB (at most 1 PiB)", s)
	}
	return Tolerance{Bytes: n}, nil
}

// String writes the tolerance as ParseTolerance reads it.
func (t Tolerance) String() string {
	if t.Bytes > 0 {
		return units.FormatBytes(t.Bytes)
	}
	return strconv.FormatFloat(t.Percent, 'g', -1, 64) + "%"
}

// Allowed is the largest value that passes against a baseline value. It
// never wraps around: past the int64 range it sticks at its end.
func (t Tolerance) Allowed(base int64) int64 {
	if t.Bytes > 0 {
		return units.SatAdd(base, t.Bytes)
	}
	slack := math.Floor(float64(base) * t.Percent / 100)
	switch {
	case math.IsNaN(slack):
		return base
	case slack >= math.MaxInt64:
		return math.MaxInt64
	case slack <= math.MinInt64:
		return units.SatAdd(base, math.MinInt64)
	}
	return units.SatAdd(base, int64(slack))
}

// Options says what Check verifies.
type Options struct {
	// Budgets are upper bounds, checked on every selected device.
	Budgets []Budget
	// Baseline, when set, is an earlier analysis (torchmem analyze --format
	// json): the peak, every category at the peak and every phase's peak
	// may not grow by more than Tolerance.
	Baseline     *result.Result
	BaselinePath string
	Tolerance    Tolerance
	// Floor is the growth over the baseline that counts only above it
	// (DefaultFloor is check's; the zero Floor counts every byte).
	Floor Floor
	// Device selects one device by id; −1 checks every device.
	Device int
	// AllowOOM lets a run that ran out of memory pass: its out-of-memory
	// check is skipped instead of failed.
	AllowOOM bool
}

// Status is the outcome of one check.
type Status string

// Check outcomes. A skipped check could not be evaluated (a phase the run
// does not have, a device missing from the baseline).
const (
	CheckPass Status = "pass"
	CheckFail Status = "fail"
	CheckSkip Status = "skip"
)

// Check kinds.
const (
	CheckKindBudget     = "budget"
	CheckKindRegression = "regression"
	// CheckKindOOM is the out-of-memory check, listed first: a run that ran
	// out of memory fails unless Options.AllowOOM.
	CheckKindOOM = "oom"
)

// CheckKeyOOM is the key of the out-of-memory check.
const CheckKeyOOM = "oom"

// Item is one verified statement about a run.
type Item struct {
	// Name identifies the check across runs ("device 0: peak budget").
	Name string `json:"name"`
	Kind string `json:"kind"` // "oom", "budget" or "regression"
	// Key is a budget key, "oom", or for a category in a phase compared
	// with the baseline "phase:PHASE:CATEGORY".
	Key    string `json:"key"`
	Device int    `json:"device"`
	Status Status `json:"status"`
	// Actual is the measured value; Limit the largest that passes (the
	// budget, or the baseline plus the tolerance). Counts for "leaks",
	// bytes otherwise.
	Actual int64 `json:"actual"`
	Limit  int64 `json:"limit"`
	// Baseline is the baseline's value (regression checks only).
	Baseline *int64 `json:"baseline,omitempty"`
	// NoiseFloor is the growth over Baseline a regression check ignores,
	// whatever the tolerance (Result.Floor on this device).
	NoiseFloor int64 `json:"noise_floor,omitempty"`
	// Message says what was found, in one line.
	Message string `json:"message"`
	// Sites, for a failed check, are the allocation sites that grew most
	// against the baseline, or that hold most of a budget's measure (of the
	// memory live at an OOM for the out-of-memory check).
	Sites []CheckSite `json:"sites,omitempty"`
	// File and Line locate the code an out-of-memory check points at: the
	// failed request's frame, as the recording machine wrote it.
	File string `json:"file,omitempty"`
	Line int64  `json:"line,omitempty"`
}

// Result is the outcome of every check on one input.
type Result struct {
	Schema    string        `json:"schema"`
	Input     result.Input  `json:"input"`
	Baseline  *result.Input `json:"baseline,omitempty"`
	Tolerance *Tolerance    `json:"tolerance,omitempty"`
	Floor     *Floor        `json:"floor,omitempty"`
	Checks    []Item        `json:"checks"`
	Passed    int           `json:"passed"`
	Failed    int           `json:"failed"`
	Skipped   int           `json:"skipped"`
}

// OK reports whether no check failed.
func (c *Result) OK() bool { return c.Failed == 0 }

// Check verifies a run against budgets and, when set, a baseline. It
// returns an error when opts selects a device the run does not have, and
// when the run or the baseline states a byte figure no analysis holds
// (negative, or beyond MaxFigureBytes): bad input, not a pass or a fail.
func Check(r *result.Result, opts Options) (*Result, error) {
	if err := r.CheckBounds(); err != nil {
		return nil, fmt.Errorf("%s: not an analysis torchmem wrote: %v", units.OneLine(r.Input.Path), err)
	}
	if opts.Baseline != nil {
		if err := opts.Baseline.CheckBounds(); err != nil {
			path := opts.BaselinePath
			if path == "" {
				path = opts.Baseline.Input.Path
			}
			return nil, fmt.Errorf("baseline %s: not an analysis torchmem wrote: %v", units.OneLine(path), err)
		}
	}
	cr := &Result{Schema: CheckSchemaID, Input: r.Input, Checks: []Item{}}
	if opts.Baseline != nil {
		in := opts.Baseline.Input
		if opts.BaselinePath != "" {
			in.Path = opts.BaselinePath
		}
		cr.Baseline = &in
		t, f := opts.Tolerance, opts.Floor
		cr.Tolerance, cr.Floor = &t, &f
	}
	budgets := append([]Budget(nil), opts.Budgets...)
	for _, b := range budgets {
		if budgetRank(b.Key) < 0 {
			return nil, fmt.Errorf("unknown budget %q", b.Key)
		}
	}
	// Canonical order; for a key given twice the last one wins.
	sort.SliceStable(budgets, func(i, j int) bool { return budgetRank(budgets[i].Key) < budgetRank(budgets[j].Key) })
	dedup := budgets[:0]
	for _, b := range budgets {
		if n := len(dedup); n > 0 && dedup[n-1].Key == b.Key {
			dedup[n-1] = b
			continue
		}
		dedup = append(dedup, b)
	}
	budgets = dedup

	var devs []*result.DeviceResult
	for i := range r.Devices {
		if opts.Device < 0 || r.Devices[i].Device == opts.Device {
			devs = append(devs, &r.Devices[i])
		}
	}
	if opts.Device >= 0 && len(devs) == 0 {
		return nil, fmt.Errorf("no device %d in %s", opts.Device, r.Input.Path)
	}
	for _, it := range checkOOM(devs, opts.AllowOOM) {
		cr.add(it)
	}
	if len(devs) == 0 && (len(budgets) > 0 || opts.Baseline != nil) {
		cr.add(Item{Name: "device memory", Kind: CheckKindBudget, Key: BudgetPeak, Device: -1, Status: CheckSkip,
			Message: "no device memory in this file: nothing to check"})
	}
	for _, d := range devs {
		for _, b := range budgets {
			cr.add(checkBudget(r, d, b))
		}
		if opts.Baseline != nil {
			for _, it := range checkBaseline(d, r.AllocatedUnit, opts.Baseline, opts.Tolerance, opts.Floor) {
				cr.add(it)
			}
		}
	}
	return cr, nil
}

// Add records one more check item and counts its outcome (for checks made
// outside Check, such as a roll-up's).
func (c *Result) Add(it Item) { c.add(it) }

func (c *Result) add(it Item) {
	switch it.Status {
	case CheckPass:
		c.Passed++
	case CheckFail:
		c.Failed++
	default:
		c.Skipped++
	}
	c.Checks = append(c.Checks, it)
}

// budgetSubject names a budget key in messages.
func budgetSubject(key string) string {
	switch key {
	case BudgetPeak:
		return "peak allocated"
	case BudgetEnd:
		return "allocated at the end"
	case BudgetGrowthPerStep:
		return "memory growth per step"
	case BudgetLeaks:
		return "medium/high-confidence leaks"
	}
	if ph, c, ok := phaseCategoryKey(key); ok {
		return fmt.Sprintf("%s at the %s peak", c, ph)
	}
	if ph, ok := strings.CutPrefix(key, BudgetPhasePrefix); ok {
		return "peak in " + ph
	}
	return key + " at the peak"
}

func checkBudget(r *result.Result, d *result.DeviceResult, b Budget) Item {
	it := Item{Name: fmt.Sprintf("device %d: %s budget", d.Device, b.Key), Kind: CheckKindBudget, Key: b.Key,
		Device: d.Device, Limit: b.Limit}
	subject := budgetSubject(b.Key)
	detail := ""
	switch {
	case b.Key == BudgetPeak:
		it.Actual = d.Peak.AllocatedBytes
		detail = fmt.Sprintf(" (in %s, step %d)", d.Peak.Phase, d.Peak.Step)
	case b.Key == BudgetEnd:
		it.Actual = d.AtEnd.AllocatedBytes
	case b.Key == BudgetGrowthPerStep:
		var worst *result.Leak
		for i := range r.Leaks {
			if l := &r.Leaks[i]; l.Device == d.Device && (worst == nil || l.BytesPerStep > worst.BytesPerStep) {
				worst = l
			}
		}
		if worst == nil {
			detail = " (no leak found)"
		} else {
			it.Actual = worst.BytesPerStep
			detail = fmt.Sprintf(" (%s at %s, %s confidence)", worst.Kind, worst.Site, worst.Confidence)
		}
	case b.Key == BudgetLeaks:
		var kinds []string
		for _, l := range r.Leaks {
			if l.Device == d.Device && (l.Confidence == result.High || l.Confidence == result.Medium) {
				it.Actual++
				kinds = append(kinds, l.Kind+" at "+l.Site)
			}
		}
		if len(kinds) > 0 {
			detail = " (" + strings.Join(kinds, "; ") + ")"
		}
		if it.Actual == 1 {
			subject = strings.TrimSuffix(subject, "s")
		}
		it.Message = fmt.Sprintf("device %d: %d %s%s", d.Device, it.Actual, subject, detail)
		if it.Actual > it.Limit {
			it.Status = CheckFail
			it.Message += fmt.Sprintf(", more than the budget of %d", it.Limit)
		} else {
			it.Status = CheckPass
			it.Message += fmt.Sprintf(", within the budget of %d", it.Limit)
		}
		return it
	case strings.HasPrefix(b.Key, BudgetPhasePrefix):
		ph := result.Phase(strings.TrimPrefix(b.Key, BudgetPhasePrefix))
		peaks, _ := diff.PhasePeaks(d.Phases)
		v, ok := peaks[ph]
		if !ok {
			it.Status = CheckSkip
			it.Message = fmt.Sprintf("device %d: no %s phase found in this run: budget of %s not checked", d.Device, ph, units.FormatBytes(b.Limit))
			return it
		}
		it.Actual = v
	default:
		c, _ := result.ParseCategory(b.Key)
		it.Actual = d.Peak.Categories[c]
	}
	it.Message = fmt.Sprintf("device %d: %s %s%s", d.Device, subject, units.FormatBytes(it.Actual), detail)
	if it.Actual > it.Limit {
		it.Status = CheckFail
		it.Message += fmt.Sprintf(" is over the budget of %s by %s", units.FormatBytes(it.Limit), units.FormatBytes(units.SatSub(it.Actual, it.Limit)))
		it.Sites = budgetSites(d, b.Key)
	} else {
		it.Status = CheckPass
		it.Message += fmt.Sprintf(" is within the budget of %s", units.FormatBytes(it.Limit))
	}
	return it
}

// regression compares one measure with the baseline: it fails when cur
// grew past both the tolerance and the noise floor (floor bytes).
func regression(dev int, key string, base, cur int64, tol Tolerance, floor int64) Item {
	b := base
	byTol := tol.Allowed(base)
	it := Item{Name: fmt.Sprintf("device %d: %s vs baseline", dev, key), Kind: CheckKindRegression, Key: key, Device: dev,
		Actual: cur, Limit: max(byTol, units.SatAdd(base, floor)), Baseline: &b, NoiseFloor: floor}
	subject := budgetSubject(key)
	change := fmt.Sprintf("%s → %s (%s)", units.FormatBytes(base), units.FormatBytes(cur), signedPercent(base, cur))
	floorWords := fmt.Sprintf("the %s noise floor", units.FormatBytes(floor))
	switch {
	case cur > it.Limit && floor > 0:
		it.Status = CheckFail
		it.Message = fmt.Sprintf("device %d: %s grew vs the baseline: %s, more than the %s tolerance and %s (at most %s)",
			dev, subject, change, tol, floorWords, units.FormatBytes(it.Limit))
	case cur > it.Limit:
		it.Status = CheckFail
		it.Message = fmt.Sprintf("device %d: %s grew vs the baseline: %s, more than the %s tolerance (at most %s)", dev, subject, change, tol, units.FormatBytes(it.Limit))
	case cur > byTol:
		it.Status = CheckPass
		it.Message = fmt.Sprintf("device %d: %s vs the baseline: %s, under %s", dev, subject, change, floorWords)
	default:
		it.Status = CheckPass
		it.Message = fmt.Sprintf("device %d: %s vs the baseline: %s, within the %s tolerance", dev, subject, change, tol)
	}
	return it
}

// signedPercent writes the change from base to cur as "+1.2%", "-3.0%",
// "+0.0%", or "was 0" when base is 0.
func signedPercent(base, cur int64) string {
	if base == 0 {
		if cur == 0 {
			return "0.0%"
		}
		return "was 0"
	}
	return fmt.Sprintf("%+.1f%%", (float64(cur)-float64(base))*100/float64(base))
}
