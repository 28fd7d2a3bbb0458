package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/snapshottest/golden"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/snapshot"
)

// demoPath is the OOM snapshot the repository ships.
var demoPath = filepath.Join("..", "testdata", "demo", "oom_snapshot.pickle")

// renderFile reads, analyses and renders one input the way `torchmem report` does.
func renderFile(t testing.TB, path string, o HTMLOptions) []byte {
	t.Helper()
	s, err := load.Open(path, snapshot.Options{})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	r := analysis.Analyze(s, analysis.DefaultOptions())
	var b bytes.Buffer
	if err := HTML(&b, r, o); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b.Bytes()
}

func TestEChartsAsset(t *testing.T) {
	sum := sha256.Sum256([]byte(echartsJS))
	if got := hex.EncodeToString(sum[:]); got != echartsSHA256 {
		t.Errorf("assets/echarts.min.js sha256 = %s, want %s (echarts %s from npm; run make echarts)", got, echartsSHA256, EChartsVersion)
	}
	if strings.Contains(strings.ToLower(echartsJS), "</script") {
		t.Error("echarts.min.js contains </script and cannot be inlined")
	}
	for _, f := range []string{"LICENSE-echarts", "NOTICE-echarts", "LICENSE-d3"} {
		if _, err := os.Stat(filepath.Join("assets", f)); err != nil {
			t.Errorf("assets/%s missing: ECharts is Apache-2.0 and its licence and notice ship with it", f)
		}
	}
}

// TestHTMLGolden renders the demo OOM snapshot and compares it with
// testdata/golden/html/demo.html, with the embedded ECharts (checked by
// TestEChartsAsset) left out.
func TestHTMLGolden(t *testing.T) {
	got := renderFile(t, demoPath, HTMLOptions{Version: "test"})
	got = bytes.Replace(got, []byte(echartsJS), []byte("/* echarts.min.js "+EChartsVersion+" */"), 1)
	golden.Check(t, filepath.Join("..", "testdata", "golden", "html", "demo.html"), got)
}

func TestHTMLDeterministic(t *testing.T) {
	a := renderFile(t, demoPath, HTMLOptions{Version: "test"})
	b := renderFile(t, demoPath, HTMLOptions{Version: "test"})
	if !bytes.Equal(a, b) {
		t.Error("two renders of the demo differ")
	}
}

// TestHTMLEscapesInput checks the page source: strings from the input never
// appear as markup, neither in the tables nor in the chart data.
func TestHTMLEscapesInput(t *testing.T) {
	var b bytes.Buffer
	if err := HTML(&b, handResult(2, 3000), HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	page := strings.Replace(b.String(), echartsJS, "", 1)
	for _, bad := range []string{"<script>alert", "<img", "onerror=alert(1)>", "<b>.pickle"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q unescaped", bad)
		}
	}
	if n := strings.Count(page, "<script"); n != 3 {
		t.Errorf("page has %d <script elements, want 3 (data, echarts, report.js)", n)
	}
	if n := strings.Count(page, "</script>"); n != 3 {
		t.Errorf("page has %d </script>, want 3", n)
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", `\u003cscript\u003ealert(1)\u003c/script\u003e`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks the escaped form %q", want)
		}
	}
}

// TestHTMLSizeBound renders a result far beyond the point budget on three
// devices and checks the page stays under the limit with the peak kept.
func TestHTMLSizeBound(t *testing.T) {
	r := handResult(3, 300_000)
	var b bytes.Buffer
	if err := HTML(&b, r, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	if b.Len() > DefaultHTMLMaxBytes {
		t.Errorf("page is %d bytes, over %d", b.Len(), DefaultHTMLMaxBytes)
	}
	t.Logf("3 devices × 300,000 points: %s", units.FormatBytes(int64(b.Len())))
	_, data, err := buildPage(r, HTMLOptions{}, budget{points: DefaultHTMLMaxPoints, bands: maxPhaseBands, rows: maxPhaseRows})
	if err != nil {
		t.Fatal(err)
	}
	for i, dc := range data.Devices {
		tl, d := dc.Timeline, r.Devices[i]
		if len(tl.X) > DefaultHTMLMaxPoints/3+8 {
			t.Errorf("device %d: %d points, over budget", i, len(tl.X))
		}
		var peak int64
		for k := range tl.X {
			var sum int64
			for _, col := range tl.Y[:len(tl.Y)-1] { // the last is reserved
				sum += col[k]
			}
			peak = max(peak, sum)
		}
		if peak != d.Peak.AllocatedBytes {
			t.Errorf("device %d: drawn peak %d, want %d", i, peak, d.Peak.AllocatedBytes)
		}
	}
}

func TestThinIndexes(t *testing.T) {
	n := 100_000
	x, alloc, res := make([]int64, n), make([]int64, n), make([]int64, n)
	for i := range x {
		x[i] = int64(i * 3)
		alloc[i] = int64((i * 7919) % 1000)
		res[i] = 2000
	}
	alloc[4242] = 5000 // a spike
	idx := thinIndexes(x, alloc, res, []int{77777}, 1000)
	if len(idx) > 1000 {
		t.Errorf("%d points, want ≤ 1000", len(idx))
	}
	has := map[int]bool{}
	for k, i := range idx {
		if k > 0 && i <= idx[k-1] {
			t.Fatalf("indexes not sorted/unique at %d", k)
		}
		has[i] = true
	}
	for _, want := range []int{0, n - 1, 4242, 77777} {
		if !has[want] {
			t.Errorf("index %d dropped", want)
		}
	}
	if got := thinIndexes(x[:10], alloc[:10], res[:10], nil, 1000); len(got) != 10 {
		t.Errorf("short series thinned to %d", len(got))
	}
}

// TestHTMLHostileSize gives the renderer what a hostile or huge file could:
// names of 100 KB, 50,000 phase spans, eight devices. The page stays under
// the limit and every chart keeps its data.
func TestHTMLHostileSize(t *testing.T) {
	r := handResult(8, 50_000)
	long := strings.Repeat(xssStrings[1], 100_000/len(xssStrings[1]))
	for i := range r.Devices {
		d := &r.Devices[i]
		for k := range d.TopSites {
			d.TopSites[k].Site = long
		}
		if d.OOM != nil {
			d.OOM.Site, d.OOM.Stack, d.OOM.Verdict = long, []string{long, long, long}, long
		}
		phases := d.Phases
		for len(d.Phases) < 50_000 {
			d.Phases = append(d.Phases, phases...)
		}
	}
	r.Leaks = append(r.Leaks, result.Leak{Site: long, Evidence: long})
	var b bytes.Buffer
	if err := HTML(&b, r, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	if b.Len() > DefaultHTMLMaxBytes {
		t.Errorf("page is %d bytes, over %d", b.Len(), DefaultHTMLMaxBytes)
	}
	t.Logf("8 devices × 50,000 points, 100 KB names, 50,000 phases: %s", units.FormatBytes(int64(b.Len())))
	if !strings.Contains(b.String(), "tm-d7-timeline") {
		t.Error("the last device's timeline is missing")
	}
}
