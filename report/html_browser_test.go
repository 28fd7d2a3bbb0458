package report

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// chromiumPath is Debian's chromium, the browser the tests open reports in.
const chromiumPath = "/usr/bin/chromium"

// newBrowser starts one headless Chromium for a test, or skips the test when
// there is none (it fails instead when TORCHMEM_REQUIRE_BROWSER=1, as .ci/run
// sets after installing it).
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath
	if _, err := os.Stat(path); err != nil {
		if p, err := exec.LookPath("chromium"); err == nil {
			path = p
		} else {
			if os.Getenv("TORCHMEM_REQUIRE_BROWSER") == "1" {
				t.Fatalf("no chromium at %s or on PATH (TORCHMEM_REQUIRE_BROWSER=1)", chromiumPath)
			}
			t.Skipf("no chromium at %s: apt-get install chromium (set TORCHMEM_REQUIRE_BROWSER=1 to fail instead)", chromiumPath)
		}
	}
	// The browser lives until shortly before go test's own deadline, never
	// a fixed time less: a page that draws slowly on a loaded machine is
	// waited for, a hung one fails the test with its message.
	alloc, cancelAlloc := chromedp.NewExecAllocator(st.Context(t),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(t.TempDir()),
	)
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

// pollUntilDeadline makes a poll wait as long as the browser's context
// lasts (until shortly before go test's deadline, newBrowser) rather than a
// fixed time that a loaded machine could exceed.
var pollUntilDeadline = chromedp.WithPollingTimeout(0)

// offlineParams are the parameters of Network.emulateNetworkConditionsByRule
// as both its shapes take them: Chromium up to at least 148 (Debian's) wants
// offline beside the rules, newer protocols (cdproto's) in each rule; each
// ignores the field it does not know.
type offlineParams struct {
	Offline                  bool                  `json:"offline"`
	MatchedNetworkConditions []*network.Conditions `json:"matchedNetworkConditions"`
}

var emulateOffline = cdp.Command[offlineParams, network.EmulateNetworkConditionsByRuleResult]{Method: network.CommandEmulateNetworkConditionsByRule}

// networkOff cuts a tab off every network.
func networkOff(tab context.Context) error {
	rule := &network.Conditions{Offline: true, DownloadThroughput: -1, UploadThroughput: -1}
	_, err := chromedp.Call(tab, emulateOffline, offlineParams{Offline: true, MatchedNetworkConditions: []*network.Conditions{rule}})
	return err
}

// pageFacts is what a report looked like in the browser.
type pageFacts struct {
	Requests []string // requests for anything but file://
	Errors   []string // console errors and warnings, uncaught exceptions, browser log errors (CSP violations among them)
	Dialogs  []string // alert/confirm/prompt dialogs that opened
	// FirstPaintMS is first-contentful-paint; ChartsMS is when the first
	// chart had finished drawing (both ms after navigation start).
	FirstPaintMS, ChartsMS float64
	Devices                []deviceState
	Screenshot             string
	// With hover: the page's text, the text of every tooltip, and how many
	// elements that could run script are there besides the page's own.
	Text, Tooltips string
	Foreign        int
}

type deviceState struct {
	Device int         `json:"device"`
	Charts []chartFact `json:"charts"`
}

type chartFact struct {
	ID       string `json:"id"`
	Instance bool   `json:"instance"`
	Canvas   bool   `json:"canvas"`
	Series   int    `json:"series"`
	Points   int    `json:"points"` // data items of series[0]
}

// pageState reads the charts of the visible device and the paint times.
const pageState = `(() => {
  const out = {device: -1, charts: []};
  const sec = document.querySelector('section.device:not([hidden])');
  if (!sec) return out;
  out.device = Number(sec.getAttribute('data-device'));
  sec.querySelectorAll('[data-chart]').forEach(el => {
    const inst = echarts.getInstanceByDom(el), o = inst ? inst.getOption() : null;
    const s0 = o && o.series && o.series[0];
    out.charts.push({id: el.id, instance: !!inst, canvas: !!el.querySelector('canvas'),
      series: o && o.series ? o.series.length : 0, points: s0 && s0.data ? s0.data.length : 0});
  });
  return out;
})()`

// hoverScript shows the tooltip of every item (the first 40 of a series) of
// every chart of the visible device, collecting the tooltips' text.
const hoverScript = `(() => {
  let tips = '';
  document.querySelectorAll('section.device:not([hidden]) [data-chart]').forEach(el => {
    const c = echarts.getInstanceByDom(el);
    if (!c) return;
    c.getOption().series.forEach((s, si) => {
      const n = Math.min(c.getModel().getSeriesByIndex(si).getData().count(), 40);
      for (let i = 0; i < n; i++) {
        c.dispatchAction({type: 'showTip', seriesIndex: si, dataIndex: i});
        tips += '\n' + el.innerText;
      }
    });
  });
  return tips;
})()`

// foreignScript counts elements that could run script or load something,
// besides the page's own three scripts: every element carrying an event
// handler attribute of any name (onerror, ontoggle, onfocus, …) or a
// javascript: URL, whether or not its event has fired yet — so that the
// count does not depend on when the browser gets round to firing it.
const foreignScript = `(() => {
  const own = new Set(Array.from(document.scripts).slice(0, 3));
  const active = e => Array.from(e.attributes).some(a => /^on/i.test(a.name) ||
    /^(href|src|action|formaction|data|xlink:href)$/i.test(a.name) && /^\s*javascript:/i.test(a.value));
  return Array.from(document.querySelectorAll('*'))
    .filter(e => !own.has(e) && (e.matches('img, iframe, object, embed, script, link, frame, base, meta[http-equiv="refresh" i]') || active(e))).length;
})()`

// chartsDrawn holds once a page's script has drawn every chart.
const chartsDrawn = `window.torchmemTiming && window.torchmemTiming.finished !== null`

// loadOffline starts tab, cuts it off every network, opens the local file
// and waits, as long as the test may, until the script ready holds.
func loadOffline(tab context.Context, file, ready string) error {
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	if err := chromedp.Do(tab); err != nil {
		return err
	}
	if err := networkOff(tab); err != nil {
		return fmt.Errorf("network off: %w", err)
	}
	u := (&url.URL{Scheme: "file", Path: abs}).String()
	if err := chromedp.Do(tab, chromedp.Navigate(u)); err != nil {
		return fmt.Errorf("open %s: %w", u, err)
	}
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](ready, pollUntilDeadline)); err != nil {
		return fmt.Errorf("charts never finished drawing: %w", err)
	}
	return nil
}

// openReport opens an HTML file in a new tab of the browser with the network
// off, waits for its charts, visits every device of the selector (hovering
// every chart item when hover is set), and takes a full-page screenshot into
// shotDir.
func openReport(t *testing.T, bctx context.Context, file, shotDir string, hover bool) pageFacts {
	t.Helper()
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var f pageFacts
	var tabRef atomic.Value // the tab's context, for answering dialogs
	tab, cancel := chromedp.NewContext(bctx, chromedp.WithListener(func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			if !strings.HasPrefix(ev.Request.URL, "file://") {
				f.Requests = append(f.Requests, ev.Request.URL)
			}
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				f.Errors = append(f.Errors, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(parts, " ")))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			f.Errors = append(f.Errors, fmt.Sprintf("exception at %d:%d: %s", d.LineNumber, d.ColumnNumber, msg))
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				f.Errors = append(f.Errors, fmt.Sprintf("log %s %s: %s %s", ev.Entry.Level, ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		case *page.EventJavascriptDialogOpening:
			f.Dialogs = append(f.Dialogs, string(ev.Type)+": "+ev.Message)
			go func() {
				if c, ok := tabRef.Load().(context.Context); ok {
					_, _ = chromedp.Call(c, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
				}
			}()
		}
	}))
	defer cancel()
	tabRef.Store(tab)
	if err := loadOffline(tab, abs, chartsDrawn+` &&
	  performance.getEntriesByType('paint').some(e => e.name === 'first-contentful-paint')`); err != nil {
		mu.Lock()
		errs := f.Errors
		mu.Unlock()
		t.Fatalf("%s: %v (errors: %q)", file, err, errs)
	}
	times, err := chromedp.Run(tab, chromedp.Evaluate[[]float64](`[
	  (performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint') || {startTime: -1}).startTime,
	  window.torchmemTiming.finished]`))
	if err != nil {
		t.Fatal(err)
	}
	f.FirstPaintMS, f.ChartsMS = times[0], times[1]
	first, err := chromedp.Run(tab, chromedp.Evaluate[int](`(() => { const s = document.getElementById('tm-device'); return s ? Number(s.value) : -1; })()`))
	if err != nil {
		t.Fatal(err)
	}
	options, err := chromedp.Run(tab, chromedp.Evaluate[[]int](
		`Array.from(document.querySelectorAll('#tm-device option')).map(o => Number(o.value))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(options) == 0 {
		options = []int{-1}
	}
	for _, dev := range options {
		if dev >= 0 {
			sel := fmt.Sprintf(`(() => { const s = document.getElementById('tm-device'); s.value = '%d';
			  s.dispatchEvent(new Event('change')); return true; })()`, dev)
			if _, err := chromedp.Run(tab, chromedp.Evaluate[bool](sel)); err != nil {
				t.Fatal(err)
			}
		}
		st, err := chromedp.Run(tab, chromedp.Evaluate[deviceState](pageState))
		if err != nil {
			t.Fatal(err)
		}
		f.Devices = append(f.Devices, st)
		if hover {
			tips, err := chromedp.Run(tab, chromedp.Evaluate[string](hoverScript))
			if err != nil {
				t.Fatal(err)
			}
			f.Tooltips += tips
		}
	}
	if hover {
		text, err := chromedp.Run(tab, chromedp.Evaluate[string](
			`document.querySelectorAll('details').forEach(d => { d.open = true; }), document.body.innerText`))
		if err != nil {
			t.Fatal(err)
		}
		foreign, err := chromedp.Run(tab, chromedp.Evaluate[int](foreignScript))
		if err != nil {
			t.Fatal(err)
		}
		f.Text, f.Foreign = text, foreign
	}
	if shotDir != "" {
		// Back to the device shown first for the picture.
		if first >= 0 {
			_, _ = chromedp.Run(tab, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const s = document.getElementById('tm-device');
			  s.value = '%d'; s.dispatchEvent(new Event('change')); return true; })()`, first)))
		}
		png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		f.Screenshot = filepath.Join(shotDir, strings.TrimSuffix(filepath.Base(file), ".html")+".png")
		if err := os.WriteFile(f.Screenshot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return f
}

// TestForeignScript keeps the XSS checks honest: foreignScript counts every
// element that carries a handler or a javascript: URL, fired or not, and
// nothing of the page's own.
func TestForeignScript(t *testing.T) {
	page := filepath.Join(t.TempDir(), "foreign.html")
	doc := `<!doctype html><html><head><script>var a</script><script>var b</script><script>var c</script></head><body>
<p>plain <a href="https://example.com/">link</a> <span data-x="javascript:1">text</span></p>
<details ontoggle="x()"><summary>s</summary></details>
<a href=" JavaScript:alert(1)">a</a>
<div onmouseover="x()">d</div>
<img alt="">
<svg><a xlink:href="javascript:alert(1)"><text>t</text></a></svg>
</body></html>`
	if err := os.WriteFile(page, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	bctx := newBrowser(t)
	tab, cancel := chromedp.NewContext(bctx)
	defer cancel()
	if err := chromedp.Do(tab, chromedp.Navigate((&url.URL{Scheme: "file", Path: page}).String())); err != nil {
		t.Fatal(err)
	}
	n, err := chromedp.Run(tab, chromedp.Evaluate[int](foreignScript))
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 { // details, a, div, img, svg a
		t.Errorf("foreignScript counted %d elements, want 5", n)
	}
}
