package report

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// bulkyResult is an analysis with everything a page lists at a size no
// real file reaches: devices devices, each with an OOM of a stack of
// 2.5·per frames and per sites, per rules and sites, 2.5·per phase spans;
// 20,000 leaks and notes; every string 300 characters.
func bulkyResult(devices, per int) *result.Result {
	long := func(i int) string { return fmt.Sprintf("%05d %s", i, strings.Repeat("w", 294)) }
	r := handResult(1, 2000)
	one := r.Devices[0]
	r.Devices = nil
	for d := range devices {
		dev := one
		dev.Device = d
		dev.Peak.AllocatedBytes += int64(d)
		dev.OOM = &result.OOM{RequestedBytes: 1 << 30, Site: long(0), Verdict: long(1)}
		for i := range per * 5 / 2 {
			dev.OOM.Stack = append(dev.OOM.Stack, long(i))
			dev.Phases = append(dev.Phases, result.PhaseSpan{Phase: result.PhaseForward, Step: i, PeakAllocatedBytes: int64(i)})
		}
		for i := range per {
			dev.OOM.TopSites = append(dev.OOM.TopSites, result.Site{Site: long(i), Bytes: int64(i)})
			dev.TopSites = append(dev.TopSites, result.Site{Site: long(i), Bytes: int64(i)})
			dev.Rules = append(dev.Rules, result.RuleUse{Rule: long(i), Bytes: int64(i)})
		}
		r.Devices = append(r.Devices, dev)
	}
	for i := range 20_000 {
		r.Leaks = append(r.Leaks, result.Leak{Kind: "step_growth", Device: i % devices, Site: long(i), BytesPerStep: 1 << 20, Evidence: long(i), Fix: long(i)})
		r.Diagnostics = append(r.Diagnostics, result.Diagnostic{Kind: "note", Device: i % devices, Message: long(i)})
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
			t.Logf("%s", units.FormatBytes(int64(b.Len())))
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

// manyDevicesResult is the analysis of snapshottest.ManyDevices(n).
func manyDevicesResult(t testing.TB, n int) *result.Result {
	data := snapshottest.Marshal(snapshottest.ManyDevices(n).Snapshot(), 4)
	snap, err := load.Read(bytes.NewReader(data), "devices.pickle", int64(len(data)), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return analysis.Analyze(snap, analysis.DefaultOptions())
}

// TestHTMLWorkLinearInDevices: the page of 256 devices allocates at most
// 2.5 times what the page of 128 does (3.9 times before: 17 renders of
// every device, where 128 took 6; now 1.4), and still shows as many
// devices as fit: all 128; of 256, a number k whose page fits while k+1
// devices do not.
func TestHTMLWorkLinearInDevices(t *testing.T) {
	cost := func(r *result.Result) (uint64, string) {
		var b bytes.Buffer
		a := snapshottest.HeapAllocated(func() {
			if err := HTML(&b, r, HTMLOptions{}); err != nil {
				t.Fatal(err)
			}
		})
		if b.Len() > DefaultHTMLMaxBytes {
			t.Fatalf("page of %d bytes", b.Len())
		}
		return a, b.String()
	}
	r128, r256 := manyDevicesResult(t, 128), manyDevicesResult(t, 256)
	c128, page128 := cost(r128)
	c256, page256 := cost(r256)
	if float64(c256) > 2.5*float64(c128) {
		t.Errorf("the page of 256 devices allocated %d bytes, of 128 devices %d: not linear", c256, c128)
	}
	if strings.Contains(page128, "this page leaves out") || !strings.Contains(page128, `id="tm-d127"`) {
		t.Error("the page of 128 devices does not show them all")
	}
	var left int
	if _, err := fmt.Sscanf(page256[strings.Index(page256, "this page leaves out ")+len("this page leaves out "):], "%d devices", &left); err != nil {
		t.Fatalf("the page of 256 devices does not say how many it leaves out: %v", err)
	}
	k := 256 - left
	fits := func(devices int) bool {
		var b bytes.Buffer
		// the budget of fitPage's last halving, lists cut to 100 entries
		bu := budget{points: DefaultHTMLMaxPoints >> 6, bands: maxPhaseBands >> 6, rows: maxPhaseRows >> 6, allocs: maxAllocRows >> 6, items: 100, devices: devices}
		err := renderHTML(&limitedWriter{buf: &b, max: DefaultHTMLMaxBytes}, trimForPage(r256, bu), HTMLOptions{MaxBytes: DefaultHTMLMaxBytes, MaxPoints: DefaultHTMLMaxPoints}, bu)
		return err == nil
	}
	if k < 100 || !fits(k) || fits(k+1) {
		t.Errorf("the page of 256 devices shows %d: fits %v, one more fits %v", k, fits(k), fits(k+1))
	}
}

// BenchmarkHTMLManyDevices renders the pages of 128 and 256 devices: the
// time per device stays about flat.
func BenchmarkHTMLManyDevices(b *testing.B) {
	for _, n := range []int{128, 256} {
		r := manyDevicesResult(b, n)
		b.Run(fmt.Sprint("devices=", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := HTML(io.Discard, r, HTMLOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/device")
		})
	}
}
