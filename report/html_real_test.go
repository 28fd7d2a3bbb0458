package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/internal/units"
)

// mustShow are the real files whose reports every run must open in the
// browser: the demo and the OOM snapshots and trace the issue names.
var mustShow = []string{
	"genC_torch2.2_nesta_OOM_pickle_named_json.pickle",
	"genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle",
	"hta_ddp_training_gpu_memory.json.gz",
}

// TestHTMLRealFiles renders a report of every real snapshot and trace and of
// the demo, checks its size, and opens it in headless Chromium with the
// network off: every chart of every device draws, nothing logs an error, and
// nothing but file:// is requested. It logs the sizes and paint times and
// leaves screenshots in $TMPDIR/torchmem-html (or TORCHMEM_HTML_OUT).
func TestHTMLRealFiles(t *testing.T) {
	files := append([]string{demoPath}, st.SharedInputs(t)...)
	found := map[string]bool{}
	for _, f := range files {
		found[filepath.Base(f)] = true
	}
	for _, want := range mustShow {
		if !found[want] {
			t.Errorf("%s missing from ../shared", want)
		}
	}
	out := os.Getenv("TORCHMEM_HTML_OUT")
	if out == "" {
		out = filepath.Join(os.TempDir(), "torchmem-html")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{}
	var table strings.Builder
	for _, f := range files {
		html := renderFile(t, f, HTMLOptions{Version: "test"})
		if len(html) > DefaultHTMLMaxBytes {
			t.Errorf("%s: report is %d bytes, over %d", f, len(html), DefaultHTMLMaxBytes)
		}
		name := filepath.Base(f)
		path := filepath.Join(out, strings.NewReplacer(".json.gz", "", ".pickle", "", ".pkl", "").Replace(name)+".html")
		if err := os.WriteFile(path, html, 0o644); err != nil {
			t.Fatal(err)
		}
		pages[name] = path
		fmt.Fprintf(&table, "%-58s %9s\n", name, units.FormatBytes(int64(len(html))))
	}
	t.Logf("report sizes (written to %s):\n%s", out, table.String())

	bctx := newBrowser(t)
	var timing strings.Builder
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			p := openReport(t, bctx, pages[name], out, false)
			checkPage(t, p)
			fmt.Fprintf(&timing, "%-58s first paint %6.0f ms, charts drawn %6.0f ms\n", name, p.FirstPaintMS, p.ChartsMS)
		})
	}
	t.Logf("in headless Chromium (screenshots in %s):\n%s", out, timing.String())
}

// checkPage fails on anything a reader would see go wrong.
func checkPage(t *testing.T, p pageFacts) {
	t.Helper()
	if len(p.Requests) > 0 {
		t.Errorf("the page requested %q; only file:// is allowed", p.Requests)
	}
	if len(p.Errors) > 0 {
		t.Errorf("console errors: %q", p.Errors)
	}
	if len(p.Dialogs) > 0 {
		t.Errorf("dialogs opened: %q", p.Dialogs)
	}
	if len(p.Devices) == 0 {
		t.Fatal("no device section shown")
	}
	if len(p.Devices) == 1 && p.Devices[0].Device < 0 {
		return // a file without device memory: the page says so, with no charts
	}
	for _, d := range p.Devices {
		if len(d.Charts) == 0 {
			t.Errorf("device %d: no charts", d.Device)
		}
		for _, c := range d.Charts {
			if !c.Instance || !c.Canvas || c.Series == 0 || c.Points == 0 {
				t.Errorf("device %d: chart %s not drawn: %+v", d.Device, c.ID, c)
			}
		}
	}
}
