// Package rollup turns the analyses of many ranks of one job — each a
// torchmem.analysis/v1 Result — into one answer: a table of ranks with their
// peaks, OOMs and leaks, the worst rank, the imbalance between ranks, the
// ranks that stand out and by how much, the first OOM, and the allocation
// sites most ranks share.
//
// It works from Results alone, so a roll-up built while analysing the files
// and one built by `torchmem merge` from their JSON summaries are the same by
// construction. A Builder takes the Results one at a time and keeps only
// what the roll-up needs of each (a table row and a coarse curve), so
// thousands of ranks fit in little memory.
package rollup

import (
	"github.com/torchmem/torchmem/result"
)

// SchemaID is the JSON schema of a roll-up: {"schema", "inputs", "rollup"}.
// Fields may be added in v1; none is renamed or removed.
const SchemaID = "torchmem.rollup/v1"

// Rollup is what the ranks of a job say together.
type Rollup struct {
	// Inputs is how many results went in.
	Inputs int `json:"inputs"`
	// Ranks has one row per input and device, by rank, then device, then input.
	Ranks []Row `json:"ranks"`
	// Worst is the row with the highest peak (null without rows).
	Worst *Worst `json:"worst"`
	// MedianPeakBytes is the median of the rows' peaks.
	MedianPeakBytes int64 `json:"median_peak_bytes"`
	// OthersMedianPeakBytes is the median peak of the rows other than the
	// worst: what the worst rank is compared with (0 with one row).
	OthersMedianPeakBytes int64 `json:"others_median_peak_bytes"`
	// Imbalance is the largest peak over the median peak of the other rows
	// (1 when all are alike, and with one row; 0 without rows or when the
	// others' median is 0). The worst row is left out of the median it is
	// compared with: with two ranks, it is the one's peak over the other's.
	Imbalance float64 `json:"imbalance"`
	// Outliers are the rows whose peak or category mix stands apart from
	// the others', largest deviation first: the maxOutliers farthest, and
	// OutliersMore says how many more stand out less.
	Outliers     []Outlier `json:"outliers"`
	OutliersMore int       `json:"outliers_more"`
	// OOMs is how many rows ran out of memory.
	OOMs int `json:"ooms"`
	// FirstOOM is the OOM that came first (null when none).
	FirstOOM *FirstOOM `json:"first_oom"`
	// CommonSites are the allocation sites among the largest three on at
	// least half of the rows, on most rows first.
	CommonSites []CommonSite `json:"common_sites"`
	// Notes say what limits trust in the roll-up (ranks guessed from the
	// order, ranks seen twice, inputs without device memory).
	Notes []string `json:"notes"`
	// Unreadable are the inputs that could not be read, with the reason,
	// in input order: the roll-up is of the others.
	Unreadable []Unreadable `json:"unreadable"`
	// Heat is memory over time for every row, coarse, for the HTML report;
	// not part of the JSON.
	Heat *Heat `json:"-"`
}

// Row is one device of one input: what the table of ranks shows.
type Row struct {
	// Input indexes the roll-up's inputs.
	Input int    `json:"input"`
	Path  string `json:"path"`
	Rank  int    `json:"rank"`
	// RankFrom says how the rank was found.
	RankFrom      RankSource `json:"rank_from"`
	Device        int        `json:"device"`
	Kind          string     `json:"kind"`
	CapacityBytes int64      `json:"capacity_bytes,omitempty"`
	PeakBytes     int64      `json:"peak_bytes"`
	// PeakReservedBytes is the reserved memory at the peak.
	PeakReservedBytes int64             `json:"peak_reserved_bytes"`
	PeakPhase         result.Phase      `json:"peak_phase"`
	PeakStep          int               `json:"peak_step"`
	PeakTimeUS        int64             `json:"peak_time_us"`
	PeakCategories    result.Categories `json:"peak_categories"`
	// Largest is the largest category at the peak.
	Largest CategoryBytes `json:"largest_category"`
	OOM     *RowOOM       `json:"oom"`
	// Leaks are the device's leak findings (at most three, largest first)
	// and LeakCount how many there are.
	Leaks     []RowLeak `json:"leaks"`
	LeakCount int       `json:"leak_count"`
	// TopSites are the device's largest allocation sites (at most three),
	// at the OOM when there is one, else at the peak.
	TopSites []result.Site `json:"top_sites"`
	// Pid is the process that wrote the input, when its name says it (the
	// files of torchmem record), and SameProcess the other files of that
	// process, which are no rows of their own.
	Pid         int           `json:"pid,omitempty"`
	SameProcess []SameProcess `json:"same_process,omitempty"`
}

// CategoryBytes is a category and its bytes.
type CategoryBytes struct {
	Category result.Category `json:"category"`
	Bytes    int64           `json:"bytes"`
}

// RowOOM is the gist of a device's OOM.
type RowOOM struct {
	RequestedBytes  int64        `json:"requested_bytes"`
	DeviceFreeBytes int64        `json:"device_free_bytes"`
	AllocatedBytes  int64        `json:"allocated_bytes"`
	Phase           result.Phase `json:"phase"`
	Step            int          `json:"step"`
	TimeUS          int64        `json:"time_us"`
	Site            string       `json:"site"`
	Fragmented      bool         `json:"fragmented"`
}

// RowLeak is the gist of a leak finding.
type RowLeak struct {
	Kind         string            `json:"kind"`
	Site         string            `json:"site"`
	BytesPerStep int64             `json:"bytes_per_step"`
	Confidence   result.Confidence `json:"confidence"`
}

// Worst names the row with the highest peak.
type Worst struct {
	Input     int    `json:"input"`
	Path      string `json:"path"`
	Rank      int    `json:"rank"`
	Device    int    `json:"device"`
	PeakBytes int64  `json:"peak_bytes"`
}

// OutlierKind says what stands out.
type OutlierKind string

// What can stand out.
const (
	// OutlierPeak: the peak is far from the median peak.
	OutlierPeak OutlierKind = "peak"
	// OutlierMix: memory at the peak is made of other categories than on
	// the other ranks.
	OutlierMix OutlierKind = "category_mix"
)

// Outlier is a row that stands apart, and by how much.
type Outlier struct {
	Input  int         `json:"input"`
	Path   string      `json:"path"`
	Rank   int         `json:"rank"`
	Device int         `json:"device"`
	Kind   OutlierKind `json:"kind"`
	// For a peak: the row's peak, the median peak and their ratio.
	PeakBytes       int64   `json:"peak_bytes"`
	MedianPeakBytes int64   `json:"median_peak_bytes"`
	Ratio           float64 `json:"ratio"`
	// For a category mix: the distance between the row's shares of the
	// peak and the median shares (half the sum of the differences: the
	// share of the peak that would have to change category, 0 to 1), and
	// the category whose share differs most, with both shares.
	Distance    float64          `json:"distance,omitempty"`
	Category    *result.Category `json:"category,omitempty"`
	Share       float64          `json:"share,omitempty"`
	MedianShare float64          `json:"median_share,omitempty"`
}

// FirstOOM is the OOM that came first.
type FirstOOM struct {
	Input  int    `json:"input"`
	Path   string `json:"path"`
	Rank   int    `json:"rank"`
	Device int    `json:"device"`
	// By is "time" when every OOM has a time on a clock the files share
	// (microseconds since the epoch), else "rank": the lowest rank's.
	By string `json:"by"`
	RowOOM
}

// Unreadable is an input that could not be read.
type Unreadable struct {
	Path string `json:"path"`
	// Rank is the rank its file name states (null when it states none).
	Rank *int `json:"rank"`
	// Error says what is wrong with it: one line, with the byte offset
	// where known.
	Error string `json:"error"`
}

// CommonSite is an allocation site among the largest on many rows.
type CommonSite struct {
	Site     string          `json:"site"`
	Category result.Category `json:"category"`
	// Ranks is how many rows have it among their three largest sites.
	Ranks int `json:"ranks"`
	// MedianBytes and MaxBytes are over those rows.
	MedianBytes int64 `json:"median_bytes"`
	MaxBytes    int64 `json:"max_bytes"`
}

// Build rolls up results given in input order.
func Build(results []*result.Result) *Rollup {
	b := NewBuilder()
	for _, r := range results {
		b.Add(r)
	}
	return b.Rollup()
}
