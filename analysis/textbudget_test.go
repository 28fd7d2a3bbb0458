package analysis

import (
	"strings"
	"testing"

	"github.com/torchmem/torchmem/result"
)

// TestTextBudget: every string of a result counts each time it appears —
// one site name that 256 devices share counts 256 times — and once the
// budget is spent a longer string is cut to 64 bytes and a marker of what
// it left out, while short ones (words, figures' names) never are; what
// is left holds the budget plus at most a cut string per string. Escapes
// count at their widest (six bytes for a control character).
func TestTextBudget(t *testing.T) {
	name := "model.py:7 " + strings.Repeat("f", 4085) // 4 KiB
	r := &result.Result{Schema: result.SchemaID, Input: result.Input{Path: "run.pickle", Format: "snapshot"}}
	for d := range 256 {
		r.Devices = append(r.Devices, result.DeviceResult{Device: d, Kind: "cuda", Peak: result.Peak{Phase: result.PhaseForward},
			TopSites: []result.Site{{Site: name, Category: result.Activation}}, OOM: &result.OOM{Site: name, Stack: []string{name, name}, Phase: result.PhaseBackward}})
	}
	const budget = 100 << 10
	b := NewTextBudget(budget)
	cut := b.Fit(r)
	full, short := 0, 0
	var total int64
	for _, d := range r.Devices {
		for _, s := range []string{d.TopSites[0].Site, d.OOM.Site, d.OOM.Stack[0], d.OOM.Stack[1]} {
			total += textCost(s)
			switch {
			case s == name:
				full++
			case strings.HasPrefix(s, name[:64]+"…[output budget: +") && len(s) < 100:
				short++
			default:
				t.Fatalf("a string neither whole nor cut: %.100q", s)
			}
		}
		if d.Peak.Phase != result.PhaseForward || d.OOM.Phase != result.PhaseBackward || d.Kind != "cuda" {
			t.Fatalf("a word was cut: %q %q %q", d.Peak.Phase, d.OOM.Phase, d.Kind)
		}
	}
	t.Logf("%d names whole, %d cut (%d), %d bytes of text", full, short, cut, total)
	// The budget less the short strings (path, words: under 1 KiB) holds
	// the names kept whole.
	if full*4096 > budget || (full+1)*4096 < budget-1024 || short != 4*256-full || cut != short {
		t.Errorf("%d whole and %d cut (%d counted), want %d whole", full, short, cut, budget/4096)
	}
	if total > budget+int64(short)*100 {
		t.Errorf("%d bytes of text for a budget of %d", total, budget)
	}
	if r.Input.Path != "run.pickle" {
		t.Errorf("the path, first, was cut: %q", r.Input.Path)
	}
	// A second result spends what is left: nothing.
	r2 := &result.Result{Devices: []result.DeviceResult{{TopSites: []result.Site{{Site: name}}}}}
	if b.Fit(r2) != 1 {
		t.Errorf("a second result's name was not cut: the budget is per run")
	}
	if got := textCost("\x1b\x1b<&a\xff"); got != 4*6+1+4 {
		t.Errorf("textCost = %d, want 29", got)
	}
}
