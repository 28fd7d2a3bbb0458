package analysis

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/snapshot"
)

// TestRealFilesInvariants runs Analyze on every real snapshot and trace in
// ../shared and checks what must hold whatever the file: categories add up
// to the allocated bytes at the end, at the peak and at the OOM; the peak
// bounds every phase; the end state of a dump equals its segments; the
// timeline is bounded and holds the peak; suggestions are ranked (by
// savings, empty_cache after the fixes that lower the peak) and carry
// evidence; the JSON has every category key.
func TestRealFilesInvariants(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..", "shared")
	var files []string
	for _, pat := range []string{"snapshots/*.pickle", "snapshots/*.pkl", "traces/*.gz"} {
		m, _ := filepath.Glob(filepath.Join(root, pat))
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Skipf("no real files in %s", root)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := snapshot.Open(f, snapshot.Options{})
			if err != nil {
				t.Skipf("reader: %v", err)
			}
			r := Analyze(s, DefaultOptions())
			mismatch := map[int]bool{}
			for _, d := range r.Diagnostics {
				if d.Kind == "replay_mismatch" || d.Kind == "address_reuse" {
					mismatch[d.Device] = true
				}
			}
			for _, d := range r.Devices {
				if got := d.AtEnd.Categories.Total(); got != d.AtEnd.AllocatedBytes {
					t.Errorf("device %d: end categories %d, allocated %d", d.Device, got, d.AtEnd.AllocatedBytes)
				}
				if got := d.Peak.Categories.Total(); got != d.Peak.AllocatedBytes {
					t.Errorf("device %d: peak categories %d, allocated %d", d.Device, got, d.Peak.AllocatedBytes)
				}
				var ruleBytes int64
				for _, u := range d.Rules {
					ruleBytes += u.Bytes
				}
				if ruleBytes != d.AtEnd.AllocatedBytes {
					t.Errorf("device %d: rules hold %d bytes, end %d", d.Device, ruleBytes, d.AtEnd.AllocatedBytes)
				}
				if d.Peak.AllocatedBytes < d.AtEnd.AllocatedBytes {
					t.Errorf("device %d: peak %d below end %d", d.Device, d.Peak.AllocatedBytes, d.AtEnd.AllocatedBytes)
				}
				for _, p := range d.Phases {
					if p.PeakAllocatedBytes > d.Peak.AllocatedBytes || p.PeakAllocatedBytes < 0 {
						t.Errorf("device %d: %s span peak %d outside [0, %d]", d.Device, p.Phase, p.PeakAllocatedBytes, d.Peak.AllocatedBytes)
					}
				}
				// Phase peaks: one per phase, the phase's highest span peak,
				// categories adding up to it; the overall peak's phase holds
				// the overall peak at the same event.
				spanPeaks, order := PhasePeaks(d.Phases)
				if len(d.PhasePeaks) != len(order) {
					t.Errorf("device %d: %d phase peaks for phases %v", d.Device, len(d.PhasePeaks), order)
				}
				for i, pp := range d.PhasePeaks {
					if i < len(order) && pp.Phase != order[i] || pp.AllocatedBytes != spanPeaks[pp.Phase] || pp.Categories.Total() != pp.AllocatedBytes {
						t.Errorf("device %d: phase peak %s %d (categories %d), spans say %d", d.Device, pp.Phase, pp.AllocatedBytes, pp.Categories.Total(), spanPeaks[pp.Phase])
					}
					var siteBytes int64
					for _, st := range pp.TopSites {
						siteBytes += st.Bytes
					}
					if siteBytes > pp.AllocatedBytes || len(pp.TopSites) > DefaultOptions().TopSites {
						t.Errorf("device %d: %s peak sites hold %d of %d", d.Device, pp.Phase, siteBytes, pp.AllocatedBytes)
					}
				}
				if pp := d.PhasePeakOf(d.Peak.Phase); d.Peak.EventIndex >= 0 && (pp == nil || pp.EventIndex != d.Peak.EventIndex || pp.AllocatedBytes != d.Peak.AllocatedBytes) {
					t.Errorf("device %d: peak at event %d in %s, phase peak %+v", d.Device, d.Peak.EventIndex, d.Peak.Phase, pp)
				}
				if o := d.OOM; o != nil {
					if o.Categories.Total() != o.AllocatedBytes || o.Site == "" || o.Verdict == "" || o.AllocatedBytes > d.Peak.AllocatedBytes {
						t.Errorf("device %d: OOM %+v", d.Device, o)
					}
				}
				dev := s.Device(d.Device)
				if len(dev.Segments) > 0 && !mismatch[d.Device] {
					var want, res int64
					for _, g := range dev.Segments {
						res += g.TotalSize
						for _, b := range g.Blocks {
							if b.State == snapshot.BlockActiveAllocated || b.State == snapshot.BlockActivePendingFree {
								if b.RequestedSize > 0 {
									want += b.RequestedSize
								} else {
									want += b.Size
								}
							}
						}
					}
					if d.AtEnd.AllocatedBytes != want || d.AtEnd.ReservedBytes != res {
						t.Errorf("device %d: end %d allocated / %d reserved, the dump says %d / %d", d.Device, d.AtEnd.AllocatedBytes, d.AtEnd.ReservedBytes, want, res)
					}
				}
				if tl := d.Timeline; tl != nil {
					if len(tl.EventIndex) > DefaultMaxTimelinePoints+3 {
						t.Errorf("device %d: %d timeline points", d.Device, len(tl.EventIndex))
					}
					if d.Peak.EventIndex >= 0 && (tl.PeakPoint < 0 || tl.Allocated[tl.PeakPoint] != d.Peak.AllocatedBytes) {
						t.Errorf("device %d: timeline misses the peak", d.Device)
					}
				}
			}
			for i, sg := range r.Suggestions {
				if sg.EstimatedSavingsBytes <= 0 || sg.Because == "" || sg.How == "" || sg.Cost == "" || sg.Title == "" {
					t.Errorf("suggestion %+v lacks evidence", sg)
				}
				if i == 0 {
					continue
				}
				// Ranked by savings, and empty_cache (which does not lower the
				// peak) after every fix that does.
				prev := r.Suggestions[i-1]
				if lowersPeak(sg.ID) && !lowersPeak(prev.ID) ||
					lowersPeak(sg.ID) == lowersPeak(prev.ID) && sg.EstimatedSavingsBytes > prev.EstimatedSavingsBytes {
					t.Errorf("suggestions not ranked: %s (%d) after %s (%d)", sg.ID, sg.EstimatedSavingsBytes, prev.ID, prev.EstimatedSavingsBytes)
				}
			}
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Devices) > 0 && !strings.Contains(string(b), `"autograd_detail":`) {
				t.Errorf("JSON lacks category keys")
			}
			if r.Leaks == nil || r.Suggestions == nil || r.Diagnostics == nil {
				t.Errorf("nil slices in %s", b[:min(len(b), 200)])
			}
		})
	}
}
