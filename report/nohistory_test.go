package report

import (
	"bytes"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
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
		var d *result.DeviceResult
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
		// The headline follows the file's line, which wraps (its continuation
		// indented) where the checkout's path length puts it.
		lines := strings.Split(text.String(), "\n")
		i := 1
		for i < len(lines)-1 && strings.HasPrefix(lines[i], "  ") {
			i++
		}
		head := lines[i]
		if len(r.Devices) == 1 && (!strings.Contains(head, "at the dump (no allocation history)") || strings.Contains(head, "peaked")) {
			t.Errorf("%s: first line %q", name, head)
		}
		fr := d.AtEnd.Fragmentation
		if fr == nil || fr.CachedFreeBytes == 0 {
			continue
		}
		cached := units.FormatBytes(fr.CachedFreeBytes) + " free in " + plural(fr.FreeBlocks, "block") + ", the largest " + units.FormatBytes(fr.LargestFreeBlockBytes)
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
