package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// xssSnapshot is a small training run that ends in an OOM, whose frame
// names, file names, annotation names and file name are xssStrings.
func xssSnapshot(t *testing.T) *snapshot.Snapshot {
	t.Helper()
	s := st.NewSim()
	evil := s.Stack(s.F("model/"+xssStrings[1]+".py", 12, xssStrings[0]), s.F("train.py", 40, xssStrings[2]))
	other := s.Stack(s.F(xssStrings[0]+".py", 7, xssStrings[1]), s.F(xssStrings[2]+".py", 9, "<module>"))
	s.Alloc(0, 64<<20, other) // weights
	for step := 0; step < 2; step++ {
		s.Annotate(0, xssStrings[step%len(xssStrings)], func() {
			var live []uint64
			for i := 0; i < 6; i++ {
				live = append(live, s.Alloc(0, int64(i+1)<<20, evil))
				s.Tick(10)
			}
			for _, a := range live {
				s.Free(0, a)
			}
		})
		s.Annotate(0, "ProfilerStep#"+xssStrings[2], func() { s.Alloc(0, 2<<20, other) })
	}
	s.Alloc(0, 200<<20, evil)
	s.OOM(0, 1<<30, 10<<20, evil)
	data := st.Marshal(s.Snapshot(), 4)
	snap, err := load.Read(bytes.NewReader(data), xssStrings[0]+".pickle", int64(len(data)), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestHTMLXSSInBrowser renders a report of xssSnapshot and of a hand-made
// Result full of xssStrings, opens both in Chromium and hovers every chart
// item: no dialog opens, no element from the input appears, and the strings
// read as text in the tables and in the tooltips.
func TestHTMLXSSInBrowser(t *testing.T) {
	snap := xssSnapshot(t)
	r := analysis.Analyze(snap, analysis.DefaultOptions())
	dir := t.TempDir()
	files := map[string]*bytes.Buffer{"xss_snapshot.html": {}, "xss_hand.html": {}}
	if err := HTML(files["xss_snapshot.html"], r, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := HTML(files["xss_hand.html"], handResult(2, 2000), HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	bctx := newBrowser(t)
	for name, b := range files {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			p := openReport(t, bctx, path, "", true)
			checkPage(t, p)
			for _, s := range xssStrings {
				if !strings.Contains(p.Text, s) {
					t.Errorf("page text lacks %q", s)
				}
			}
			if !strings.Contains(p.Tooltips, xssStrings[0]) && !strings.Contains(p.Tooltips, xssStrings[1]) {
				t.Errorf("no tooltip shows an input string as text: %q", p.Tooltips)
			}
			if p.Foreign != 0 {
				t.Errorf("%d img/script/[onerror] elements came from the input", p.Foreign)
			}
		})
	}
}
