package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/rollup"
	"github.com/torchmem/torchmem/snapshot"
)

// jobRollup is the roll-up of snapshottest.FaultyJob's 8 ranks.
func jobRollup(t *testing.T) *rollup.Rollup {
	t.Helper()
	b := rollup.NewBuilder()
	for _, c := range st.FaultyJob('G') {
		s, _ := st.RankRun(c)
		data := st.Marshal(s.Snapshot(), 4)
		snap, err := load.Read(bytes.NewReader(data), fmt.Sprintf("job/oom_snapshot_rank%d.pickle", c.Rank), int64(len(data)), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		b.Add(analysis.Analyze(snap, analysis.DefaultOptions()))
	}
	return b.Rollup()
}

// manyRanks is the roll-up of n made-up ranks of one job: two steps of
// forward and backward each on one clock, peaks that differ a little, rank 7
// twice as high, rank 11 out of memory; site and path names may carry
// strings from xssStrings.
func manyRanks(n int, evil bool) *rollup.Rollup {
	b := rollup.NewBuilder()
	name := func(i int) string {
		if evil {
			return xssStrings[i%len(xssStrings)]
		}
		return fmt.Sprintf("model.py:%d forward", 60+i%3)
	}
	for r := 0; r < n; r++ {
		peak := int64(20<<30) + int64(r%17)<<20
		if r == 7 {
			peak *= 2
		}
		res := &result.Result{Schema: result.SchemaID, Input: result.Input{Path: fmt.Sprintf("run/%srank%d.pickle", map[bool]string{true: xssStrings[1]}[evil], r)}}
		d := result.DeviceResult{Device: r % 8, Kind: "cuda", Peak: result.Peak{AllocatedBytes: peak, Phase: result.PhaseBackward, Step: 2}}
		d.Peak.Categories[result.Activation] = peak * 3 / 4
		d.Peak.Categories[result.Parameter] = peak / 4
		t0 := int64(1_754_000_000_000_000) + int64(r)*50
		for k, ph := range []result.Phase{result.PhaseForward, result.PhaseBackward, result.PhaseForward, result.PhaseBackward} {
			d.Phases = append(d.Phases, result.PhaseSpan{Phase: ph, Step: k/2 + 1, StartUS: t0 + int64(k)*1000, EndUS: t0 + int64(k+1)*1000 - 1,
				StartEvent: k * 10, EndEvent: k*10 + 9, PeakAllocatedBytes: peak * int64(k%2+1) / 2, Events: 10})
		}
		for i := 0; i < 3; i++ {
			d.TopSites = append(d.TopSites, result.Site{Site: name(i), Bytes: peak / int64(2+i), Count: 4, Category: result.Activation})
		}
		if r == 11 {
			d.OOM = &result.OOM{RequestedBytes: 1 << 30, DeviceFreeBytes: 1 << 20, Phase: result.PhaseForward, Step: 2, TimeUS: t0 + 2500, Site: name(1)}
		}
		res.Devices = []result.DeviceResult{d}
		if evil && r == 3 {
			res.Leaks = []result.Leak{{Kind: "growing_list", Device: d.Device, Site: xssStrings[2], BytesPerStep: 1 << 20, Confidence: result.High}}
		}
		b.Add(res)
	}
	if evil { // unreadable inputs, and a process's OOM snapshot and exit snapshot
		b.Fail(xssStrings[0], xssStrings[1])
		b.Fail("run/"+xssStrings[2]+"rank9.pickle", xssStrings[0])
		for _, name := range []string{"snapshot_rank20_5.pickle", "oom_snapshot_rank20_5.pickle"} {
			d := result.DeviceResult{Device: 4, Kind: "cuda", Peak: result.Peak{AllocatedBytes: 20 << 30}}
			d.Peak.Categories[result.Parameter] = 20 << 30
			b.Add(&result.Result{Schema: result.SchemaID, Input: result.Input{Path: "run/" + xssStrings[1] + "/" + name}, Devices: []result.DeviceResult{d}})
		}
	}
	return b.Rollup()
}

// TestRollupHTMLSize: whatever the number of ranks, the page stays under
// the HTML size limit; beyond what fits, the table lists the ranks that
// matter first (the worst and the OOM) and says how many it leaves out, and
// the charts group neighbouring ranks.
func TestRollupHTMLSize(t *testing.T) {
	for _, n := range []int{1, 8, 300, 3000, 10000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var b bytes.Buffer
			if err := RollupHTML(&b, manyRanks(n, false), HTMLOptions{Version: "test"}); err != nil {
				t.Fatal(err)
			}
			page := b.String()
			if b.Len() > DefaultHTMLMaxBytes {
				t.Errorf("%d ranks: page of %d bytes, over %d", n, b.Len(), DefaultHTMLMaxBytes)
			}
			rows := strings.Count(page, `<tr class="more">`)
			if rows == 0 || rows > n || rows > maxRollupTableRows {
				t.Errorf("%d ranks: %d table rows", n, rows)
			}
			if rows < n && !strings.Contains(page, fmt.Sprintf("of %d (the worst, OOMs, outliers and leaks first", n)) {
				t.Errorf("%d ranks, %d listed: the page does not say so", n, rows)
			}
			for _, r := range []int{7, 11} { // the worst, the OOM
				if n > r && !regexp.MustCompile(fmt.Sprintf(`<tr id="tm-r\d+" class="[^"]*">\s*<td>%d[ <]`, r)).MatchString(page) {
					t.Errorf("%d ranks: rank %d not in the table", n, r)
				}
			}
			data := pageData(t, page)
			if len(data.Heat.Rows) > maxHeatRows || len(data.Peaks.Labels) > maxPeakBars || len(data.Heat.Rows) > n {
				t.Errorf("%d ranks: %d heat map rows, %d bars", n, len(data.Heat.Rows), len(data.Peaks.Labels))
			}
		})
	}
}

// pageData reads the charts' JSON of a roll-up page.
func pageData(t *testing.T, page string) rollupData {
	t.Helper()
	m := regexp.MustCompile(`(?s)<script type="application/json" id="tm-data">(.*?)</script>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no chart data in the page")
	}
	var d rollupData
	if err := json.Unmarshal([]byte(m[1]), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRollupHTMLEscapes: names from the inputs never become markup, in the
// page or in its chart data.
func TestRollupHTMLEscapes(t *testing.T) {
	var b bytes.Buffer
	if err := RollupHTML(&b, manyRanks(12, true), HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, s := range xssStrings {
		if strings.Contains(page, s) {
			t.Errorf("the page holds %q unescaped", s)
		}
	}
	if strings.Count(page, "<script") != 3 {
		t.Errorf("%d <script elements; want the page's own 3", strings.Count(page, "<script"))
	}
	for _, want := range []string{`<div id="tm-unreadable"><p class="verdict">2 inputs could not be read`,
		"Other files of this process (pid 5), no ranks of their own:"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// rollupPageFacts is what a roll-up page looked like in the browser.
type rollupPageFacts struct {
	Errors, Requests, Dialogs []string
	Charts                    []chartFact
	Tooltips, Text            string
	Foreign                   int
	Opened                    string // the rank of the details opened by clicking the worst rank's bar
}

// openRollup opens a roll-up page with the network off, waits for its
// charts, hovers every item of both, and clicks the bar of the worst rank.
func openRollup(t *testing.T, bctx context.Context, file string) rollupPageFacts {
	t.Helper()
	var mu sync.Mutex
	var f rollupPageFacts
	tab, cancel := chromedp.NewContext(bctx, chromedp.WithListener(func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			if !strings.HasPrefix(ev.Request.URL, "file://") {
				f.Requests = append(f.Requests, ev.Request.URL)
			}
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
				f.Errors = append(f.Errors, "console."+string(ev.Type))
			}
		case *runtime.EventExceptionThrown:
			f.Errors = append(f.Errors, ev.ExceptionDetails.Text)
		case *page.EventJavascriptDialogOpening:
			f.Dialogs = append(f.Dialogs, ev.Message)
		}
	}))
	defer cancel()
	if err := loadOffline(tab, file, chartsDrawn); err != nil {
		mu.Lock()
		errs := f.Errors
		mu.Unlock()
		t.Fatalf("%v (errors %q)", err, errs)
	}
	charts, err := chromedp.Run(tab, chromedp.Evaluate[[]chartFact](`Array.from(document.querySelectorAll('[data-chart]')).map(el => {
	  const inst = echarts.getInstanceByDom(el), o = inst ? inst.getOption() : null, s0 = o && o.series && o.series[0];
	  return {id: el.id, instance: !!inst, canvas: !!el.querySelector('canvas'), series: o ? o.series.length : 0,
	    points: s0 && s0.data ? s0.data.length : 0};
	})`))
	if err != nil {
		t.Fatal(err)
	}
	tips, err := chromedp.Run(tab, chromedp.Evaluate[string](`(() => {
	  let tips = '';
	  document.querySelectorAll('[data-chart]').forEach(el => {
	    const c = echarts.getInstanceByDom(el);
	    const n = Math.min(c.getModel().getSeriesByIndex(0).getData().count(), 400);
	    for (let i = 0; i < n; i++) { c.dispatchAction({type: 'showTip', seriesIndex: 0, dataIndex: i}); tips += '\n' + el.innerText; }
	  });
	  return tips;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	opened, err := chromedp.Run(tab, chromedp.Evaluate[string](`(() => {
	  const c = echarts.getInstanceByDom(document.getElementById('tm-peaks'));
	  const flags = JSON.parse(document.getElementById('tm-data').textContent).peaks.flags;
	  const i = flags.indexOf('worst');
	  c.trigger('click', {componentType: 'series', seriesIndex: 0, dataIndex: i});
	  const d = document.querySelector('details[open]');
	  return d ? d.querySelector('summary').textContent : '';
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelectorAll('details').forEach(d => { d.open = true; }), document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := chromedp.Run(tab, chromedp.Evaluate[int](foreignScript))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	f.Charts, f.Tooltips, f.Text, f.Foreign, f.Opened = charts, tips, text, foreign, opened
	return f
}

// TestRollupHTMLInBrowser opens the roll-up pages of the simulated job, of
// 3,000 made-up ranks and of ranks named with xssStrings in Chromium: both
// charts draw (one heat map cell per rank and column with memory, one bar
// per rank or group), nothing is requested, nothing but the page's own
// scripts runs, every tooltip and table cell shows input strings as text,
// and clicking the worst rank's bar opens its details.
func TestRollupHTMLInBrowser(t *testing.T) {
	bctx := newBrowser(t)
	pages := []struct {
		name  string
		ru    *rollup.Rollup
		worst string
	}{
		{"faulty_job", jobRollup(t), "details of rank 3 cuda:3"},
		{"3000_ranks", manyRanks(3000, false), "details of rank 7 cuda:7"},
		{"xss", manyRanks(12, true), "details of rank 7 cuda:7"},
	}
	dir := t.TempDir()
	for _, p := range pages {
		t.Run(p.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := RollupHTML(&b, p.ru, HTMLOptions{Version: "test"}); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, p.name+".html")
			if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			f := openRollup(t, bctx, file)
			if len(f.Requests) > 0 || len(f.Errors) > 0 || len(f.Dialogs) > 0 || f.Foreign > 0 {
				t.Errorf("requests %q, errors %q, dialogs %q, %d foreign elements", f.Requests, f.Errors, f.Dialogs, f.Foreign)
			}
			data := pageData(t, b.String())
			cells := 0
			for _, row := range data.Heat.Cells {
				for _, v := range row {
					if v >= 0 {
						cells++
					}
				}
			}
			want := map[string]int{"tm-heat": cells, "tm-peaks": len(data.Peaks.Labels)}
			if len(f.Charts) != 2 {
				t.Fatalf("charts %+v", f.Charts)
			}
			for _, c := range f.Charts {
				if !c.Instance || !c.Canvas || c.Points != want[c.ID] || c.Points == 0 {
					t.Errorf("chart %+v; want %d points", c, want[c.ID])
				}
			}
			if f.Opened != p.worst {
				t.Errorf("clicking the worst bar opened %q; want %q", f.Opened, p.worst)
			}
			if p.name == "xss" {
				for _, s := range xssStrings {
					if !strings.Contains(f.Text, s) {
						t.Errorf("page text lacks %q", s)
					}
				}
				if !strings.Contains(f.Tooltips, "7 cuda:7") {
					t.Errorf("tooltips %q", f.Tooltips[:min(len(f.Tooltips), 300)])
				}
			}
		})
	}
}
