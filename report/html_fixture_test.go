package report

import (
	"github.com/torchmem/torchmem/result"
)

// Strings that would run script if a renderer let them through as HTML.
var xssStrings = []string{
	`<script>alert(1)</script>`,
	`"><img src=x onerror=alert(1)>`,
	`</script><script>alert(2)</script>`,
}

// handResult is a Result made by hand: one or more devices with a sawtooth
// timeline of n points over three training steps, an OOM on the last device,
// and site names from xssStrings.
func handResult(devices, n int) *result.Result {
	r := &result.Result{
		Schema: result.SchemaID,
		Input:  result.Input{Path: "hand/made<b>.pickle", Format: "snapshot", Generation: "G", Bytes: 123456, Recording: "python-stacks"},
		Leaks: []result.Leak{{Kind: "growing_list", Device: 0, Site: xssStrings[0], BytesPerStep: 1 << 20, Steps: 3,
			TotalBytes: 3 << 20, Confidence: result.Medium, Evidence: xssStrings[1], Fix: "append loss.item()"}},
		Suggestions: []result.Suggestion{
			{ID: "activation_checkpointing", Title: "Checkpoint activations", Because: "activations dominate " + xssStrings[2],
				EstimatedSavingsBytes: 3 << 30, Cost: "~30% slower", How: "torch.utils.checkpoint"},
			{ID: "expandable_segments", Title: "Use expandable segments", Because: "fragmentation", EstimatedSavingsBytes: 1 << 29, Cost: "none",
				How: "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"},
		},
		Diagnostics: []result.Diagnostic{{Kind: "ring_buffer_overflow", Device: 0, Message: "the oldest entries were dropped " + xssStrings[0]}},
	}
	for dev := 0; dev < devices; dev++ {
		r.Devices = append(r.Devices, handDevice(dev, n, dev == devices-1))
	}
	return r
}

func handDevice(dev, n int, oom bool) result.DeviceResult {
	t := &result.Timeline{PeakPoint: -1, OOMPoint: -1}
	const param, grad, opt = 1 << 30, 1 << 30, 2 << 30
	steps := 3
	per := n / steps
	var peak int64
	var d result.DeviceResult
	for i := 0; i < n; i++ {
		step, j := i/per, i%per
		var cats result.Categories
		cats[result.Parameter] = param
		if step > 0 || j > per*2/3 {
			cats[result.Gradient] = grad
			cats[result.OptimizerState] = opt
		}
		// Activations rise in forward (first half) and fall in backward.
		h := per / 2
		act := int64(j)
		if j > h {
			act = int64(max(2*h-j, 0))
		}
		cats[result.Activation] = act * (4 << 30) / int64(h) / 4096 * 4096
		cats[result.Temporary] = int64((i*7919)%97) << 20
		alloc := cats.Total()
		t.EventIndex = append(t.EventIndex, i)
		t.TimeUS = append(t.TimeUS, 1_700_000_000_000_000+int64(i)*150)
		t.Allocated = append(t.Allocated, alloc)
		t.Reserved = append(t.Reserved, alloc+(512<<20)+int64(step)<<28)
		for c := range cats {
			t.ByCategory[c] = append(t.ByCategory[c], cats[c])
		}
		if alloc > peak {
			peak, t.PeakPoint = alloc, i
			d.Peak = result.Peak{AllocatedBytes: alloc, ReservedBytes: t.Reserved[i], TimeUS: t.TimeUS[i], EventIndex: i,
				Phase: result.PhaseForward, Step: step + 1, Categories: cats}
		}
	}
	last := n - 1
	d.Device, d.Kind, d.Capacity, d.Timeline = dev, "cuda", 16<<30, t
	for c := range t.ByCategory {
		d.AtEnd.Categories[c] = t.ByCategory[c][last]
	}
	d.AtEnd.AllocatedBytes, d.AtEnd.ReservedBytes = t.Allocated[last], t.Reserved[last]
	for s := 0; s < steps; s++ {
		a := s * per
		for k, ph := range []result.Phase{result.PhaseForward, result.PhaseBackward, result.PhaseOptimizer} {
			b, e := a+k*per/3, a+(k+1)*per/3-1
			d.Phases = append(d.Phases, result.PhaseSpan{Phase: ph, Step: s + 1, StartUS: t.TimeUS[b], EndUS: t.TimeUS[e],
				StartEvent: b, EndEvent: e, PeakAllocatedBytes: t.Allocated[b]})
		}
	}
	for k, s := range append([]string{"model.py:93 forward", "torch/optim/adam.py:120 _init_group"}, xssStrings...) {
		d.TopSites = append(d.TopSites, result.Site{Site: s, Bytes: int64(5-k) << 28, Count: 10 * (k + 1), Category: result.Category(k % 4)})
	}
	d.Rules = []result.RuleUse{{Rule: "optimizer: torch/optim _init_group", Category: result.OptimizerState, Confidence: result.High, Blocks: 4, Bytes: opt}}
	if oom {
		i := t.PeakPoint
		t.OOMPoint = i
		var cats result.Categories
		for c := range cats {
			cats[c] = t.ByCategory[c][i]
		}
		d.OOM = &result.OOM{RequestedBytes: 1 << 30, DeviceFreeBytes: 200 << 20, Phase: result.PhaseForward, Step: d.Peak.Step,
			TimeUS: t.TimeUS[i], EventIndex: i, Site: xssStrings[1], Stack: append([]string{"model.py:93 forward"}, xssStrings...),
			AllocatedBytes: t.Allocated[i], ReservedBytes: t.Reserved[i], Categories: cats,
			Fragmentation: result.Fragmentation{CachedFreeBytes: 1200 << 20, LargestFreeBlockBytes: 300 << 20, Fragmented: true},
			TopSites:      d.TopSites[:3]}
	}
	return d
}
