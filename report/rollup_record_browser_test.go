package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/rollup"
	"github.com/torchmem/torchmem/snapshot"
)

// TestRecordedDDPRollupInBrowser opens, in Chromium with the network off,
// the roll-up page of the two ranks torchmem record wrote on a GPU
// (../shared/recorded/record_ddp) with each rank's own page beside it, as
// record writes them: the page says rank 1 peaked highest, 1.55× rank 0's
// peak; clicking the worst rank's bar opens rank 1's details, whose link
// opens rank 1's own page, which draws its charts; nothing is requested.
func TestRecordedDDPRollupInBrowser(t *testing.T) {
	src := st.SharedDir(t, filepath.Join("recorded", "record_ddp"))
	bctx := newBrowser(t)
	dir := t.TempDir()
	b := rollup.NewBuilder()
	pages := map[string]string{}
	for _, name := range []string{"snapshot_rank0_682.pickle", "snapshot_rank1_683.pickle"} {
		s, err := load.Open(filepath.Join(src, name), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := analysis.Analyze(s, analysis.DefaultOptions())
		p, _ := rollup.ProcessOf(name)
		page := fmt.Sprintf("report_rank%d_%d.html", p.Rank, p.Pid)
		var own bytes.Buffer
		if err := HTML(&own, r, HTMLOptions{Version: "test"}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, page), own.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		pages[r.Input.Path] = page
		b.Add(r)
	}
	var roll bytes.Buffer
	if err := RollupHTML(&roll, b.Rollup(), HTMLOptions{Version: "test", RankPages: pages}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "report.html")
	if err := os.WriteFile(file, roll.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	f := openRollup(t, bctx, file)
	if len(f.Requests) > 0 || len(f.Errors) > 0 || len(f.Dialogs) > 0 || f.Foreign > 0 {
		t.Errorf("requests %q, errors %q, dialogs %q, %d foreign elements", f.Requests, f.Errors, f.Dialogs, f.Foreign)
	}
	text := strings.Join(strings.Fields(f.Text), " ")
	for _, want := range []string{
		"rank 1 peaked highest, 1.50 GiB on cuda:0, 1.55× the peak of rank 0 cuda:0 (993 MiB)",
		"highest peak: 1.50 GiB (rank 1)", "imbalance: 1.55×",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the page does not say %q:\n%.600s", want, text)
		}
	}
	if f.Opened != "details of rank 1 cuda:0" {
		t.Errorf("clicking the worst bar opened %q; want rank 1's details", f.Opened)
	}

	// Follow rank 1's link (the URL the browser resolves it to) to its own
	// page.
	tab, cancel := chromedp.NewContext(bctx)
	defer cancel()
	if err := loadOffline(tab, file, chartsDrawn); err != nil {
		t.Fatal(err)
	}
	href, err := chromedp.Run(tab, chromedp.Evaluate[string](`(() => {
	  const row = [...document.querySelectorAll('details')].find(d => d.querySelector('summary').textContent === 'details of rank 1 cuda:0');
	  return row ? row.querySelector('a.rank-page').href : '';
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tab, chromedp.Navigate(href)); err != nil {
		t.Fatalf("open %s: %v", href, err)
	}
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](chartsDrawn+` && !document.getElementById('tm-heat')`, pollUntilDeadline)); err != nil {
		t.Fatalf("%s never drew its charts: %v", href, err)
	}
	title, err := chromedp.Run(tab, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if title != "torchmem report — snapshot_rank1_683.pickle" {
		t.Errorf("the link opened %q; want rank 1's own page", title)
	}
}
