package check

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/rollup"
)

// BudgetImbalance is the budget key of a roll-up's imbalance: the largest
// peak over the median peak of the other devices (torchmem check --budget
// imbalance=1.2).
const BudgetImbalance = "imbalance"

// ParseImbalance reads an imbalance budget: a ratio of at least 1 ("1.2",
// "1.2x").
func ParseImbalance(value string) (float64, error) {
	v := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(value), "x"), "×")
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 1 {
		return 0, fmt.Errorf("budget %s=%q: want a ratio of the largest peak to the median peak of the others, at least 1, like 1.2", BudgetImbalance, value)
	}
	return f, nil
}

// CheckImbalance checks the roll-up's imbalance against limit: it fails
// when the largest peak is more than limit times the median peak of the
// other devices. Actual and Limit are bytes: the worst rank's peak and
// limit × that median. With fewer than two devices there is nothing to
// compare: skipped.
func CheckImbalance(ru *rollup.Rollup, limit float64) *Result {
	cr := &Result{Schema: CheckSchemaID, Checks: []Item{},
		Input: result.Input{Path: fmt.Sprintf("roll-up of %d inputs", ru.Inputs), Format: "rollup"}}
	it := Item{Name: "imbalance budget", Kind: CheckKindBudget, Key: BudgetImbalance, Device: -1}
	if len(ru.Ranks) < 2 || ru.Worst == nil || ru.OthersMedianPeakBytes <= 0 {
		it.Status = CheckSkip
		it.Message = fmt.Sprintf("%d device(s) with memory: no imbalance to measure", len(ru.Ranks))
		cr.Add(it)
		return cr
	}
	it.Device = ru.Worst.Device
	it.Actual = ru.Worst.PeakBytes
	it.Limit = int64(math.Min(limit*float64(ru.OthersMedianPeakBytes), math.MaxInt64))
	ratio := float64(ru.Worst.PeakBytes) / float64(ru.OthersMedianPeakBytes)
	it.Status = CheckPass
	word := "within"
	if ratio > limit {
		it.Status, word = CheckFail, "over"
	}
	it.Message = fmt.Sprintf("imbalance %.2f× %s the budget of %.2f×: rank %d's peak %s against the median peak %s of the other %s (allowed %s)",
		ratio, word, limit, ru.Worst.Rank, units.FormatBytes(ru.Worst.PeakBytes), units.FormatBytes(ru.OthersMedianPeakBytes),
		units.Plural(len(ru.Ranks)-1, "device"), units.FormatBytes(it.Limit))
	cr.Add(it)
	return cr
}

// Baselines are what check compares the ranks of a job with: one analysis
// for every rank, or — from a baseline roll-up — each rank's own analysis.
type Baselines struct {
	one    *result.Result
	byRank map[int]*result.Result
	n      int // inputs added
}

// OneBaseline compares every rank with r.
func OneBaseline(r *result.Result) *Baselines { return &Baselines{one: r} }

// NewBaselines starts an empty set of per-rank baselines; Add fills it with
// a baseline roll-up's inputs, in their order.
func NewBaselines() *Baselines { return &Baselines{byRank: map[int]*result.Result{}} }

// Add takes the baseline roll-up's next input; its rank is found as for the
// roll-up itself (Identify). A rank given twice keeps its first input.
func (b *Baselines) Add(r *result.Result) {
	rank, _ := rollup.Identify(r.Input, b.n)
	b.n++
	if _, ok := b.byRank[rank]; !ok {
		b.byRank[rank] = r
	}
}

// For returns the baseline of the input r at position order among the
// inputs checked, or nil and why there is none.
func (b *Baselines) For(r *result.Result, order int) (*result.Result, string) {
	if b.byRank == nil {
		return b.one, ""
	}
	rank, _ := rollup.Identify(r.Input, order)
	if base := b.byRank[rank]; base != nil {
		return base, ""
	}
	return nil, fmt.Sprintf("rank %d is not in the baseline roll-up (%s)", rank, units.Plural(len(b.byRank), "rank"))
}
