package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis"
	st "github.com/torchmem/torchmem/snapshot/snapshottest"
)

// TestDumpsWithoutHistory: on every real file whose device holds no
// allocation history (state-only dumps, an OOM observer's with the history
// off), the first line says it is the state at the dump — never a peak "in
// unknown" — and the text, the Markdown and the page say what the allocator
// caches there: the free bytes, in how many blocks, the largest.
func TestDumpsWithoutHistory(t *testing.T) {
	n := 0
	for _, f := range st.SharedInputs(t) {
		r := analyzeFile(t, f)
		var d *analysis.DeviceResult
		for i := range r.Devices {
			if r.Devices[i].NoHistory && r.Devices[i].AtEnd.AllocatedBytes > 0 {
				d = &r.Devices[i]
				break
			}
		}
		if d == nil {
			continue
		}
		n++
		name := FileName(f)
		var text, md, page bytes.Buffer
		if err := Text(&text, r); err != nil {
			t.Fatal(err)
		}
		if err := Markdown(&md, r); err != nil {
			t.Fatal(err)
		}
		if err := HTML(&page, r, HTMLOptions{Version: "test"}); err != nil {
			t.Fatal(err)
		}
		head := strings.SplitN(text.String(), "\n", 3)[1]
		if len(r.Devices) == 1 && (!strings.Contains(head, "at the dump (no allocation history)") || strings.Contains(head, "peaked")) {
			t.Errorf("%s: first line %q", name, head)
		}
		fr := d.AtEnd.Fragmentation
		if fr == nil || fr.CachedFreeBytes == 0 {
			continue
		}
		cached := analysis.FormatBytes(fr.CachedFreeBytes) + " free in " + plural(fr.FreeBlocks, "block") + ", the largest " + analysis.FormatBytes(fr.LargestFreeBlockBytes)
		for format, out := range map[string]string{"text": strings.Join(strings.Fields(text.String()), " "), "markdown": md.String(), "html": page.String()} {
			if !strings.Contains(out, cached) {
				t.Errorf("%s: the %s does not say %q", name, format, cached)
			}
		}
	}
	if n < 4 {
		t.Errorf("%d real files without history checked: the test sees too little", n)
	}
}
