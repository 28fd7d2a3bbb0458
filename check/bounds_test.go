package check

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/diff"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// TestGateArithmeticSaturates: tolerances and site sums never wrap around,
// whatever the figures (a baseline peak of −9·10^18 with 5% passed any run).
func TestGateArithmeticSaturates(t *testing.T) {
	cases := []struct {
		tol  Tolerance
		base int64
		want int64
	}{
		{Tolerance{Percent: 5}, -9_000_000_000_000_000_000, math.MinInt64}, // wrapped to +8.99·10^18 before
		{Tolerance{Percent: 5}, math.MinInt64, math.MinInt64},
		{Tolerance{Percent: 5}, math.MaxInt64, math.MaxInt64},
		{Tolerance{Percent: 1e300}, math.MinInt64 / 2, math.MinInt64},
		{Tolerance{Bytes: math.MaxInt64}, math.MaxInt64, math.MaxInt64},
		{Tolerance{Bytes: 10}, math.MinInt64, math.MinInt64 + 10},
	}
	for _, c := range cases {
		if got := c.tol.Allowed(c.base); got != c.want {
			t.Errorf("%+v.Allowed(%d) = %d, want %d", c.tol, c.base, got, c.want)
		}
	}
	if got := units.SatAdd(math.MaxInt64, 1); got != math.MaxInt64 {
		t.Errorf("SatAdd = %d", got)
	}
	if got := units.SatSub(math.MinInt64, 1); got != math.MinInt64 {
		t.Errorf("SatSub = %d", got)
	}
	if got := units.SatSub(1, math.MinInt64); got != math.MaxInt64 {
		t.Errorf("SatSub = %d", got)
	}
	if d := diff.NewDelta(math.MinInt64, math.MaxInt64); d.Delta != math.MaxInt64 {
		t.Errorf("delta %d", d.Delta)
	}
	// Sites summed by name saturate instead of wrapping to a negative growth.
	big := []result.Site{{Site: "a", Bytes: math.MaxInt64 - 1}, {Site: "a", Bytes: math.MaxInt64 - 1}}
	g := siteGrowth(nil, big, -1, diff.SiteMatch{})
	if len(g) != 1 || g[0].Bytes != math.MaxInt64 {
		t.Errorf("growth %+v", g)
	}
}

// TestCheckRefusesAbsurdFigures: a baseline (or run) whose figures are
// negative or beyond 1 PiB is bad input, not a pass: Check returns an
// error (exit 2).
func TestCheckRefusesAbsurdFigures(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*result.Result)
		want string
	}{
		{"negative peak", func(r *result.Result) { r.Devices[0].Peak.AllocatedBytes = -9_000_000_000_000_000_000 }, "peak.allocated_bytes is -9000000000000000000 bytes"},
		{"absurd category", func(r *result.Result) { r.Devices[0].Peak.Categories[result.Activation] = 1 << 60 }, "peak.categories.activation is 1152921504606846976 bytes"},
		{"negative site", func(r *result.Result) { r.Devices[0].TopSites[1].Bytes = -1 }, "top_sites[1].bytes is -1 bytes"},
		{"negative leak", func(r *result.Result) { r.Leaks[0].BytesPerStep = -5 }, "leaks[0].bytes_per_step is -5 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := checkRun()
			c.edit(base)
			_, err := Check(checkRun(), Options{Baseline: base, BaselinePath: "base.json", Tolerance: Tolerance{Percent: 5}, Device: -1})
			if err == nil || !strings.Contains(err.Error(), "baseline base.json: not an analysis torchmem wrote") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			_, err = Check(base, Options{Budgets: []Budget{{Key: BudgetPeak, Limit: 1}}, Device: -1})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run: got %v", err)
			}
		})
	}
}

// resultJSON is an analysis as analyze --format json writes it.
func resultJSON(t *testing.T, r *result.Result) []byte {
	r.Schema = result.SchemaID
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadResultBounds: an analysis JSON read back holds its figures, its
// devices, its array items and its strings within bounds; whitespace is not
// kept.
func TestReadResultBounds(t *testing.T) {
	read := func(r io.Reader) (*result.Result, uint64, error) {
		var res *result.Result
		var err error
		n := heapAllocated(func() { res, err = result.ReadResult(r, "base.json", result.SchemaID, 8<<30) })
		return res, n, err
	}
	ok := resultJSON(t, checkRun())
	// 64 MiB of spaces between every token of a real analysis.
	spaced := bytes.ReplaceAll(ok, []byte(`,"`), []byte(", \n\t"+strings.Repeat(" ", 1<<20)+`"`))
	res, n, err := read(bytes.NewReader(spaced))
	if err != nil || res.Devices[0].Peak.AllocatedBytes != 1000 {
		t.Fatalf("spaced analysis: %v", err)
	}
	if n > uint64(len(spaced))/8 {
		t.Errorf("allocated %d bytes for %d bytes of JSON", n, len(spaced))
	}
	devices := `{"schema": "torchmem.analysis/v1", "devices": [` + strings.Repeat(`{}, `, 300) + `{}]}`
	manyItems := `{"schema": "torchmem.analysis/v1", "devices": [{"phases": [` + strings.Repeat(`{},`, 5<<20) + `{}]}]}`
	longString := `{"schema": "torchmem.analysis/v1", "leaks": [{"site": "` + strings.Repeat("a", 2<<20) + `"}]}`
	negative := strings.Replace(string(ok), `"allocated_bytes":1000`, `"allocated_bytes":-9000000000000000000`, 1)
	for _, c := range []struct {
		name, in, want string
		maxAlloc       uint64
	}{
		{"257 devices", devices, "more than 256 devices", 1 << 20},
		{"5M array items", manyItems, "more than 1048576 array items", 64 << 20},
		{"2 MiB string", longString, "a string longer than 1048576 bytes", 16 << 20},
		{"negative figure", negative, "allocated_bytes is -9000000000000000000 bytes", 1 << 20},
		{"truncated", string(ok[:len(ok)/2]), "ends early", 1 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, n, err := read(strings.NewReader(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if n > c.maxAlloc {
				t.Errorf("allocated %d bytes", n)
			}
		})
	}
	// An analysis of 256 devices is read.
	many := &result.Result{Schema: result.SchemaID}
	for i := range 256 {
		many.Devices = append(many.Devices, result.DeviceResult{Device: i})
	}
	if _, _, err := read(bytes.NewReader(resultJSON(t, many))); err != nil {
		t.Errorf("256 devices: %v", err)
	}
}

// heapAllocated is snapshottest.HeapAllocated: the heap bytes f allocates.
var heapAllocated = snapshottest.HeapAllocated
