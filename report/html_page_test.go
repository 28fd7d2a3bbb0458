package report

import (
	"bytes"
	"html"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// TestHTMLPageWords: on every real file's page the categories have their
// names of every other output (no "unclassified", no "autograd
// internals"; every category holding memory at the peak named, the new
// ones — workspace, autocast_cache, cuda_graph_pool — included), each OOM verdict is said once, the header names the file
// and not the path it was read from, and single allocations are listed
// around the peak (and the OOM) within the size limit.
func TestHTMLPageWords(t *testing.T) {
	files := append([]string{demoPath}, st.SharedInputs(t)...)
	for _, f := range files {
		r := analyzeFile(t, f)
		r.Input.Path = "/home/someone/private/" + FileName(f)
		var b bytes.Buffer
		if err := HTML(&b, r, HTMLOptions{Version: "test"}); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		name := FileName(f)
		if b.Len() > DefaultHTMLMaxBytes {
			t.Errorf("%s: %d bytes", name, b.Len())
		}
		for _, old := range []string{"unclassified", "autograd internals", "/home/someone"} {
			if strings.Contains(page, old) {
				t.Errorf("%s: the page says %q", name, old)
			}
		}
		if !strings.Contains(page, `<span class="file">`+html.EscapeString(name)+`</span>`) {
			t.Errorf("%s: the header does not name the file", name)
		}
		for _, d := range r.Devices {
			for c := result.Category(0); c < result.NumCategories; c++ {
				if d.Peak.Categories[c] > 0 && !strings.Contains(page, ">"+c.String()+"<") {
					t.Errorf("%s: %s not named", name, c)
				}
			}
			if d.OOM != nil {
				if n := strings.Count(page, clip(html.EscapeString(d.OOM.Verdict))); n != 1 {
					t.Errorf("%s: device %d's verdict said %d times", name, d.Device, n)
				}
				if d.OOM.Allocations != nil && !strings.Contains(page, `data-moment="the OOM"`) {
					t.Errorf("%s: no allocations at the OOM", name)
				}
			}
			if d.PeakAllocations != nil && !strings.Contains(page, `data-moment="the peak"`) {
				t.Errorf("%s: no allocations at the peak", name)
			}
		}
	}
}
