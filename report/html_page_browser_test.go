package report

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// openTab opens an HTML report in a new tab with the network off and waits
// until its charts are drawn; the tab closes with the test.
func openTab(t *testing.T, bctx context.Context, file string) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(bctx)
	t.Cleanup(cancel)
	if err := loadOffline(tab, file, chartsDrawn); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return tab
}

// eval runs a script in the tab and returns its value.
func eval[T any](t *testing.T, tab context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	return v
}

// showDevice switches the page to device section i.
func showDevice(t *testing.T, tab context.Context, i int) {
	t.Helper()
	eval[bool](t, tab, fmt.Sprintf(`(() => { const s = document.getElementById('tm-device'); if (!s) return true;
	  s.value = '%d'; s.dispatchEvent(new Event('change')); return true; })()`, i))
}

// writeReport renders path's report into a temporary file.
func writeReport(t *testing.T, path string) (string, *result.Result) {
	t.Helper()
	s, err := load.Open(path, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := analysis.Analyze(s, analysis.DefaultOptions())
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))+".html")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := HTML(f, r, HTMLOptions{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	return out, r
}

// fragmentationState reads the free-blocks chart of the visible device: the
// extent of its value axis, its bars and their labels as drawn.
const fragmentationState = `(() => {
  const el = document.querySelector('section.device:not([hidden]) [data-chart="fragmentation"]');
  const c = el && echarts.getInstanceByDom(el);
  if (!c) return null;
  const y = c.getModel().getComponent('yAxis').axis.scale.getExtent();
  const o = c.getOption();
  const texts = c.getZr().storage.getDisplayList(true).filter(e => e.style && typeof e.style.text === 'string').map(e => e.style.text);
  return {axisMax: y[1], names: o.xAxis[0].data, values: o.series[0].data.map(d => typeof d === 'object' ? d.value : d), texts: texts};
})()`

type fragState struct {
	AxisMax float64   `json:"axisMax"`
	Names   []string  `json:"names"`
	Values  []float64 `json:"values"`
	Texts   []string  `json:"texts"`
}

// TestHTMLFragmentationChart: at an OOM the free-blocks chart draws the
// request and the largest free block on one axis that reaches the request,
// each labelled with its size, so the gap is visible (nesta: 384 MiB asked,
// 9.62 MiB the largest free block; the 3-device snapshot: 4.94 GiB and
// 16.5 MiB).
func TestHTMLFragmentationChart(t *testing.T) {
	bctx := newBrowser(t)
	for _, name := range []string{"genC_torch2.2_nesta_OOM_pickle_named_json.pickle", "genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle"} {
		t.Run(name, func(t *testing.T) {
			page, r := writeReport(t, st.SharedFile(t, "snapshots", name))
			tab := openTab(t, bctx, page)
			for i, d := range r.Devices {
				if d.OOM == nil {
					continue
				}
				showDevice(t, tab, i)
				got := eval[*fragState](t, tab, fragmentationState)
				if got == nil {
					t.Fatalf("device %d: no free-blocks chart", d.Device)
				}
				req, largest := float64(d.OOM.RequestedBytes), float64(d.OOM.Fragmentation.LargestFreeBlockBytes)
				if got.AxisMax < req {
					t.Errorf("device %d: the axis stops at %.0f, below the %.0f request", d.Device, got.AxisMax, req)
				}
				if len(got.Values) < 2 || got.Names[0] != "request" || got.Values[0] != req || !strings.HasPrefix(got.Names[1], "largest free block") || got.Values[1] != largest {
					t.Errorf("device %d: bars %q %v, want the request %.0f then the largest free block %.0f", d.Device, got.Names, got.Values, req, largest)
				}
				for _, want := range []string{units.FormatBytes(d.OOM.RequestedBytes), units.FormatBytes(d.OOM.Fragmentation.LargestFreeBlockBytes)} {
					if !contains(got.Texts, want) {
						t.Errorf("device %d: no label %q drawn (texts %q)", d.Device, want, got.Texts)
					}
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// phaseLabels lists the phase names drawn on the visible timeline, with
// their boxes on the canvas. The display list is rebuilt from the chart's
// elements (getDisplayList(true)), not read as the last painted frame left
// it, so what the test sees does not depend on when the browser paints.
const phaseLabels = `(() => {
  const el = document.querySelector('section.device:not([hidden]) [data-chart="timeline"]');
  const c = el && echarts.getInstanceByDom(el);
  if (!c) return [];
  const names = new Set(['forward', 'backward', 'optimizer', 'zero_grad', 'data', 'unknown']);
  const out = [];
  c.getZr().storage.getDisplayList(true).forEach(e => {
    if (!e.style || !names.has(e.style.text) || e.invisible || e.ignore) return;
    const r = e.getBoundingRect().clone();
    r.applyTransform(e.getComputedTransform());
    out.push({text: e.style.text, x: r.x, y: r.y, w: r.width, h: r.height});
  });
  return out;
})()`

type labelBox struct {
	Text       string
	X, Y, W, H float64
}

// TestHTMLPhaseLabels: the phase names on every real file's timelines never
// run into each other (the 3-device snapshot's data and zero_grad spans
// drew "datzero_grad"): any two labels' boxes are apart.
func TestHTMLPhaseLabels(t *testing.T) {
	bctx := newBrowser(t)
	files := append([]string{demoPath}, st.SharedInputs(t)...)
	drawn := 0
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			page, r := writeReport(t, f)
			tab := openTab(t, bctx, page)
			for i := range r.Devices {
				showDevice(t, tab, i)
				boxes := eval[[]labelBox](t, tab, phaseLabels)
				drawn += len(boxes)
				for _, o := range overlaps(boxes) {
					t.Errorf("device %d: labels %s overlap", r.Devices[i].Device, o)
				}
			}
		})
	}
	if drawn == 0 {
		t.Error("no phase label drawn on any page: the test sees nothing")
	}
}

// overlaps lists the pairs of label boxes that run into each other.
func overlaps(boxes []labelBox) []string {
	var out []string
	for a := range boxes {
		for b := a + 1; b < len(boxes); b++ {
			p, q := boxes[a], boxes[b]
			if p.X < q.X+q.W && q.X < p.X+p.W && p.Y < q.Y+q.H && q.Y < p.Y+p.H {
				out = append(out, fmt.Sprintf("%q at %.0f+%.0f and %q at %.0f+%.0f", p.Text, p.X, p.W, q.Text, q.X, q.W))
			}
		}
	}
	return out
}

// TestHTMLPhaseLabelsNarrow: phase names never run into each other at any
// width of the window, on a timeline of many narrow phases side by side
// (data, zero_grad and optimizer spans of 7% of the axis each, as a run
// with a slow data loader and short steps draws them), and the widest
// window still names some of them.
func TestHTMLPhaseLabelsNarrow(t *testing.T) {
	r := handResult(1, 3000)
	d := &r.Devices[0]
	tl := d.Timeline
	d.Phases = nil
	n := len(tl.TimeUS)
	names := []result.Phase{result.PhaseData, result.PhaseZeroGrad, result.PhaseOptimizer}
	for k, a := 0, 0; a+n*7/100 < n; k, a = k+1, a+n*7/100 {
		e := a + n*7/100 - 1
		d.Phases = append(d.Phases, result.PhaseSpan{Phase: names[k%3], Step: k/3 + 1, StartUS: tl.TimeUS[a], EndUS: tl.TimeUS[e],
			StartEvent: a, EndEvent: e, PeakAllocatedBytes: tl.Allocated[a]})
	}
	page := filepath.Join(t.TempDir(), "narrow.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := HTML(f, r, HTMLOptions{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	bctx := newBrowser(t)
	tab := openTab(t, bctx, page)
	for _, w := range []int64{1400, 1000, 800, 600, 400} {
		if err := chromedp.Do(tab, chromedp.EmulateViewport(w, 1000)); err != nil {
			t.Fatal(err)
		}
		eval[bool](t, tab, `(window.dispatchEvent(new Event('resize')), true)`)
		boxes := eval[[]labelBox](t, tab, phaseLabels)
		if w == 1400 && len(boxes) < 3 {
			t.Errorf("%d px: only %d phase names drawn", w, len(boxes))
		}
		for _, o := range overlaps(boxes) {
			t.Errorf("%d px: labels %s overlap", w, o)
		}
	}
}

// TestHTMLBytesInBrowser: the page's tooltips and labels write sizes as
// analysis.FormatBytes does (the one byte formatter).
func TestHTMLBytesInBrowser(t *testing.T) {
	bctx := newBrowser(t)
	tab := openTab(t, bctx, writeReportDemo(t))
	values := []int64{0, 1, 512, 1023, 1024, 1536, 10 << 10, 1<<20 - 1, 384 << 20, 1610612736, 23278534656, 8519680, 10092544, -(2 << 20), 1<<30 - 1, 54802667524, 1 << 50}
	var list []string
	for _, v := range values {
		list = append(list, fmt.Sprint(v))
	}
	got := eval[[]string](t, tab, `[`+strings.Join(list, ",")+`].map(window.torchmemFmtBytes)`)
	for i, v := range values {
		if want := units.FormatBytes(v); i >= len(got) || got[i] != want {
			t.Errorf("fmtBytes(%d) in the page = %q, Go says %q", v, got[i], want)
		}
	}
}

func writeReportDemo(t *testing.T) string {
	page, _ := writeReport(t, demoPath)
	return page
}

// TestHTMLAllocationsInBrowser: a user sees single allocations around the
// peak and the OOM, and opens one to read its stack.
func TestHTMLAllocationsInBrowser(t *testing.T) {
	bctx := newBrowser(t)
	page, r := writeReport(t, st.SharedFile(t, "snapshots", "genC_torch2.2_nesta_OOM_pickle_named_json.pickle"))
	tab := openTab(t, bctx, page)
	type table struct {
		Moment string `json:"moment"`
		Rows   int    `json:"rows"`
		Stack  string `json:"stack"`
	}
	tables := eval[[]table](t, tab, `Array.from(document.querySelectorAll('section.device:not([hidden]) table.allocs')).map(tb => {
	  tb.closest('details.allocs').open = true;
	  const d = tb.querySelector('td.site details');
	  if (d) d.open = true;
	  return {moment: tb.getAttribute('data-moment'), rows: tb.querySelectorAll('tbody tr td:first-child').length,
	    stack: d && d.querySelector('ol.stack').offsetHeight > 0 ? d.querySelector('ol.stack').innerText : ''};
	})`)
	oom := r.Devices[0].OOM.Allocations
	want := map[string]*result.AllocationsAt{"the OOM": oom, "the peak": r.Devices[0].PeakAllocations}
	if len(tables) != 2 {
		t.Fatalf("tables %+v", tables)
	}
	for _, tb := range tables {
		at := want[tb.Moment]
		if at == nil || tb.Rows != len(at.Largest)+min(len(at.Recent), maxAllocRows/2) {
			t.Errorf("%s: %d rows", tb.Moment, tb.Rows)
			continue
		}
		if first := at.Largest[0].Stack[0]; !strings.HasPrefix(tb.Stack, first) {
			t.Errorf("%s: the first row's stack reads %q, want it to start with %q", tb.Moment, tb.Stack, first)
		}
	}
}
