package analysis

import (
	"fmt"
	"sort"
	"strings"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// oomAt builds the post-mortem of the oom event at index i.
func oomAt(h *history.History, sites *history.SiteCache, i, topN int) *result.OOM {
	e := &h.Device.Events[i]
	site := sites.Get(e.Stack)
	o := &result.OOM{
		RequestedBytes:          e.Size,
		DeviceFreeBytes:         e.DeviceFree(),
		Phase:                   h.Phases.At(i),
		Step:                    h.Phases.StepAt(i),
		TimeUS:                  h.TimeUS(i),
		EventIndex:              i,
		Site:                    site.Name,
		SiteFile:                site.File,
		Stack:                   h.DisplayStack(e.Stack, 12),
		AllocatedBytes:          h.AllocatedAt(i),
		AllocatedRequestedBytes: h.RequestedOrNil(i),
		ReservedBytes:           h.ReservedAt(i),
		Categories:              h.CategoriesAt(i),
		Fragmentation:           history.FragmentationAt(h, i, e.Size),
		TopSites:                h.TopSitesIn(sites, i, topN),
		LiveByPhase:             liveByPhase(h, i),
		Layout:                  history.StateAt(h, i),
	}
	if o.Site == "" {
		o.Site = result.SiteNoFrames
	}
	if !reservedKnown(h) {
		o.ReservedBytes, o.ReservedUnknown = 0, true
	}
	if site.File != "" && site.Line > 0 {
		o.SiteLine = site.Line
	}
	o.Verdict = oomVerdict(h, o, e)
	return o
}

// oomVerdict is the one-sentence explanation of an OOM.
func oomVerdict(h *history.History, o *result.OOM, e *snapshot.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Out of memory in %s", o.Phase)
	if o.Step > 0 && h.Steps.Source != result.StepsNone {
		fmt.Fprintf(&b, " (step %d)", o.Step)
	}
	if o.Site != result.SiteNoFrames {
		fmt.Fprintf(&b, " at %s", o.Site)
	}
	m := h.Markers.Get(e.Stack)
	if m.SdpaMath {
		b.WriteString(" (scaled_dot_product_attention, math backend)")
	}
	fmt.Fprintf(&b, ": %s requested with %s free on the device", units.FormatBytes(o.RequestedBytes), units.FormatBytes(o.DeviceFreeBytes))
	if o.AllocatedBytes > 0 {
		fmt.Fprintf(&b, "; %s allocated (%s)", units.FormatBytes(o.AllocatedBytes), topCategories(o.Categories, 2))
	}
	fr := o.Fragmentation
	switch {
	case fr.Fragmented:
		fmt.Fprintf(&b, " and %s cached free, but fragmented: the largest free block is %s", units.FormatBytes(fr.CachedFreeBytes), units.FormatBytes(fr.LargestFreeBlockBytes))
	case fr.CachedFreeBytes > 0:
		fmt.Fprintf(&b, " and %s cached free", units.FormatBytes(fr.CachedFreeBytes))
	}
	// The allocator frees its cached segments and retries before giving up:
	// segment_free/segment_unmap entries right before the oom.
	var released int64
	for k := o.EventIndex - 1; k >= 0; k-- {
		a := h.Device.Events[k].Action
		if a != snapshot.ActionSegmentFree && a != snapshot.ActionSegmentUnmap {
			break
		}
		released += h.Device.Events[k].Size
	}
	if released > 0 {
		fmt.Fprintf(&b, ", after the allocator had released %s of cached segments and retried", units.FormatBytes(released))
	}
	if processLimited(o) {
		fmt.Fprintf(&b, ". The device had room: a per-process limit (torch.cuda.set_per_process_memory_fraction) below its reserved memory plus the request (%s) refused it", units.FormatBytes(o.ReservedBytes+o.RequestedBytes))
	}
	b.WriteString(".")
	return b.String()
}

// processLimited reports whether an OOM happened with room on the device:
// cudaMalloc of the segment the request needs would have succeeded (the
// device had it free, with room to spare for the driver), and the cache
// was not merely too fragmented to serve it, so the caching allocator
// refused it itself — under a per-process memory fraction, which it checks
// against its reserved bytes plus the request before asking CUDA.
func processLimited(o *result.OOM) bool {
	if o.ReservedUnknown || o.Fragmentation.Fragmented || o.DeviceFreeBytes <= 0 {
		return false
	}
	return o.DeviceFreeBytes >= segmentFor(o.RequestedBytes)+64<<20
}

// segmentFor is the size of the segment the caching allocator asks CUDA
// for to serve a request of n bytes: 2 MiB for small requests, 20 MiB up
// to 10 MiB, else n rounded up to 2 MiB.
func segmentFor(n int64) int64 {
	switch {
	case n <= 1<<20:
		return 2 << 20
	case n < 10<<20:
		return 20 << 20
	}
	return (n + 2<<20 - 1) / (2 << 20) * (2 << 20)
}

// topCategories renders the n largest categories ("activation 5.2 GiB,
// parameter 1.1 GiB").
func topCategories(c result.Categories, n int) string {
	idx := make([]int, result.NumCategories)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return c[idx[a]] > c[idx[b]] })
	var parts []string
	for _, i := range idx[:n] {
		if c[i] > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", result.Category(i), units.FormatBytes(c[i])))
		}
	}
	if len(parts) == 0 {
		return "nothing classified"
	}
	return strings.Join(parts, ", ")
}

// liveByPhase groups the blocks live after event i by the phase and step
// that allocated them.
func liveByPhase(h *history.History, i int) []result.PhaseBytes {
	type key struct {
		p    result.Phase
		step int
	}
	m := map[key]*result.PhaseBytes{}
	for _, b := range h.LiveBlocks(i) {
		k := key{result.PhaseBeforeRecording, 0}
		if b.Alloc >= 0 {
			k = key{h.Phases.At(int(b.Alloc)), h.Phases.StepAt(int(b.Alloc))}
		}
		pb := m[k]
		if pb == nil {
			pb = &result.PhaseBytes{Phase: k.p, Step: k.step}
			m[k] = pb
		}
		pb.Bytes += b.Size
		pb.Count++
	}
	out := make([]result.PhaseBytes, 0, len(m))
	for _, pb := range m {
		out = append(out, *pb)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Bytes != out[b].Bytes {
			return out[a].Bytes > out[b].Bytes
		}
		if out[a].Phase != out[b].Phase {
			return out[a].Phase < out[b].Phase
		}
		return out[a].Step < out[b].Step
	})
	return out
}
