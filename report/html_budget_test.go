package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis"
)

// bulkyResult is an analysis with everything a page lists at a size no
// real file reaches: devices devices, each with an OOM of a stack of
// 2.5·per frames and per sites, per rules and sites, 2.5·per phase spans;
// 20,000 leaks and notes; every string 300 characters.
func bulkyResult(devices, per int) *analysis.Result {
	long := func(i int) string { return fmt.Sprintf("%05d %s", i, strings.Repeat("w", 294)) }
	r := handResult(1, 2000)
	one := r.Devices[0]
	r.Devices = nil
	for d := range devices {
		dev := one
		dev.Device = d
		dev.Peak.AllocatedBytes += int64(d)
		dev.OOM = &analysis.OOM{RequestedBytes: 1 << 30, Site: long(0), Verdict: long(1)}
		for i := range per * 5 / 2 {
			dev.OOM.Stack = append(dev.OOM.Stack, long(i))
			dev.Phases = append(dev.Phases, analysis.PhaseSpan{Phase: analysis.PhaseForward, Step: i, PeakAllocatedBytes: int64(i)})
		}
		for i := range per {
			dev.OOM.TopSites = append(dev.OOM.TopSites, analysis.Site{Site: long(i), Bytes: int64(i)})
			dev.TopSites = append(dev.TopSites, analysis.Site{Site: long(i), Bytes: int64(i)})
			dev.Rules = append(dev.Rules, analysis.RuleUse{Rule: long(i), Bytes: int64(i)})
		}
		r.Devices = append(r.Devices, dev)
	}
	for i := range 20_000 {
		r.Leaks = append(r.Leaks, analysis.Leak{Kind: "step_growth", Device: i % devices, Site: long(i), BytesPerStep: 1 << 20, Evidence: long(i), Fix: long(i)})
		r.Diagnostics = append(r.Diagnostics, analysis.Diagnostic{Kind: "note", Device: i % devices, Message: long(i)})
	}
	return r
}

// TestHTMLUnderTwoMBForAnyInput: whatever an analysis holds — hundreds of
// devices, tens of thousands of findings, stacks of thousands of frames —
// the page stays under 2 MB (49 MiB came from a 1.4 KB gzip, 516 MiB from
// a 615 KB trace) and says what it leaves out.
func TestHTMLUnderTwoMBForAnyInput(t *testing.T) {
	for _, c := range []struct{ devices, per int }{{1, 2000}, {256, 100}} {
		t.Run(fmt.Sprint(c.devices, " devices"), func(t *testing.T) {
			var b bytes.Buffer
			if err := HTML(&b, bulkyResult(c.devices, c.per), HTMLOptions{}); err != nil {
				t.Fatal(err)
			}
			if b.Len() > DefaultHTMLMaxBytes {
				t.Errorf("page of %d bytes", b.Len())
			}
			if !strings.Contains(b.String(), "this page leaves out") || !strings.Contains(b.String(), `id="tm-d0"`) {
				t.Errorf("the page does not say what it leaves out, or shows no device")
			}
			t.Logf("%s", analysis.FormatBytes(int64(b.Len())))
		})
	}
}

// TestHTMLPlainPageWhenNothingFits: a limit below the size of the embedded
// charting library itself gives the plain page, under the limit.
func TestHTMLPlainPageWhenNothingFits(t *testing.T) {
	var b bytes.Buffer
	if err := HTML(&b, handResult(2, 100), HTMLOptions{MaxBytes: 200_000}); err != nil {
		t.Fatal(err)
	}
	if b.Len() > 200_000 || !strings.Contains(b.String(), "does not fit in 200000 bytes") || strings.Contains(b.String(), "<script>alert") {
		t.Errorf("plain page of %d bytes:\n%.600s", b.Len(), b.String())
	}
}
