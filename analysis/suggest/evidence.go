package suggest

import (
	"fmt"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/analysis/whatif"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// Evidence is what suggestions are chosen from: one device at its decisive
// moment (the OOM when there is one, else the peak).
type Evidence struct {
	device     int
	name       string // "device 0", or "the cpu (host memory)"
	moment     string // "at the OOM" or "at the peak"
	index      int
	phase      result.Phase
	cats       result.Categories
	total      int64
	oom        *result.OOM
	oomSDPA    bool  // the failing allocation is SDPA's math backend
	oomAttn    bool  // the failing allocation is inside attention code
	attention  int64 // live bytes of attention's seq² tensors (whatif.SeqSquared)
	seqSquared []bool
	attnSite   string
	expandable bool
	capacity   int64
	endAlloc   int64
	endRes     int64
	PeakAlloc  int64
	peakRes    int64
	// hasState: the allocator's segments are known (a snapshot with
	// dump-time segments), so cached memory splits into the two parts below.
	hasState bool
	// peakFragmented is the cached free memory at the peak inside segments
	// that hold live blocks (what expandable segments reclaim); endWhollyFree
	// the cached segments without a live block at the end (what
	// torch.cuda.empty_cache() releases).
	PeakFragmented, endWhollyFree int64
	gradsInFwd                    int64 // gradient bytes live at the forward peak
	lateZero                      int   // event of a zero_grad that frees them after that peak (−1)
	steps                         int   // training steps seen
	// Training: something shows that the run trains — a backward, optimizer
	// or zero_grad phase, gradients or optimizer state, or a training loop in
	// the stacks (trainingFrame, named in trainedBy).
	Training  bool
	TrainedBy string
	// Backward: the run has a backward that keeps activations — one was
	// recorded (a backward phase that allocated, or gradients), or a training
	// run was cut off in the forward of its decisive moment (it ran out of
	// memory there, or the recording ends in it) and no step of it ended
	// without a backward.
	Backward bool
	fp32     bool   // parameters known to be fp32 (chrome-trace shapes)
	noFrames bool   // the file records no frame at all: nothing shows how the weights were made
	gpu      string // the device's name when the file says it ("Tesla V100-SXM2-32GB")
	gpuMajor int    // its compute capability's major version when the file says it, else 0
	// done is what the run already does (autocast, checkpointing,
	// quantized weights, a pretrained checkpoint).
	done practices
	// movedGrads are the gradients Module.to moved with the model, live at
	// the decisive moment.
	movedGrads int64
	// ddpBuckets are DistributedDataParallel's gradient buckets live at the
	// decisive moment, bucketedGrads the parameters' own gradients beside
	// them (what gradient_as_bucket_view=True makes views of the buckets).
	ddpBuckets, bucketedGrads int64
	// StatesFirst: at an OOM, parameters, gradients and optimizer state
	// leave the device less room than the failed request: no activation
	// fix can make it fit.
	StatesFirst bool
}

// SeqSquared is whatif.SeqSquared of the device the evidence is about,
// which Gather made: the what-if's projections take it instead of making
// it again.
func (ev *Evidence) SeqSquared() []bool { return ev.seqSquared }

// Gather collects the evidence of one device.
func Gather(h *history.History, dr *result.DeviceResult) *Evidence {
	ev := &Evidence{device: dr.Device, capacity: dr.Capacity, expandable: h.Expandable(), gpu: h.Device.Name, gpuMajor: h.Device.ComputeMajor,
		endAlloc: dr.AtEnd.AllocatedBytes, endRes: dr.AtEnd.ReservedBytes,
		PeakAlloc: dr.Peak.AllocatedBytes, peakRes: dr.Peak.ReservedBytes}
	ev.name = fmt.Sprintf("device %d", dr.Device)
	if h.Device.Kind == snapshot.DeviceCPU {
		ev.name = "the cpu (host memory)"
	}
	if dr.OOM != nil {
		ev.moment, ev.index, ev.phase, ev.cats, ev.oom = "at the OOM", dr.OOM.EventIndex, dr.OOM.Phase, dr.OOM.Categories, dr.OOM
		m := h.Markers.Get(h.Device.Events[dr.OOM.EventIndex].Stack)
		ev.oomSDPA, ev.oomAttn = m.SdpaMath, m.Attention
	} else {
		ev.moment, ev.index, ev.phase, ev.cats = "at the peak", dr.Peak.EventIndex, dr.Peak.Phase, dr.Peak.Categories
	}
	ev.total = ev.cats.Total()
	ev.steps = len(h.Steps.Spans)
	if len(h.Device.Segments) > 0 {
		ev.hasState = true
		ev.PeakFragmented = history.FragmentationAt(h, dr.Peak.EventIndex, 0).FreeInUsedSegmentsBytes
		end := history.FragmentationAt(h, h.EndIndex(), 0)
		ev.endWhollyFree = end.CachedFreeBytes - end.FreeInUsedSegmentsBytes
	}
	trainingEvidence(h, ev, dr)
	// Attention's memory is what grows with the square of the sequence —
	// scores, softmax, masks, their gradients — as the what-if finds it
	// (attention code's queries, keys and values are per-token tensors).
	sites := map[string]int64{}
	sq := whatif.SeqSquared(h)
	ev.seqSquared = sq
	for bi, b := range h.LiveBlocks(ev.index) {
		if b.Untracked || !sq[bi] {
			continue
		}
		if b.Category == result.Activation || b.Category == result.Temporary || b.Category == result.AutogradDetail {
			ev.attention += b.Requested
			if h.Markers.Get(b.Stack).Attention {
				sites[history.SiteOf(h.Snap, b.Stack)] += b.Requested
			}
		}
	}
	var best int64
	for s, v := range sites {
		if v > best || v == best && s < ev.attnSite {
			ev.attnSite, best = s, v
		}
	}
	// Gradients alive during forward: gradients kept across steps.
	var fwdPeak int64 = -1
	fwdIdx := -1
	for _, sp := range h.Phases.Spans {
		if sp.Phase == result.PhaseForward && sp.PeakAllocatedBytes > fwdPeak {
			fwdPeak = sp.PeakAllocatedBytes
			if sp.Events > 0 {
				for k, v := range h.AllocatedRange(max(sp.StartEvent, 0), sp.EndEvent) {
					if v == fwdPeak {
						fwdIdx = k
						break
					}
				}
			}
		}
	}
	ev.lateZero = -1
	if fwdIdx >= 0 {
		ev.gradsInFwd = h.CategoriesAt(fwdIdx)[result.Gradient]
		for _, b := range h.LiveBlocks(fwdIdx) {
			if b.Rule() == history.RuleFreedByZeroGrad && (ev.lateZero < 0 || int(b.Free) < ev.lateZero) {
				ev.lateZero = int(b.Free)
			}
			if b.Rule() == history.RuleDDPBucket && b.Category == result.Gradient {
				ev.gradsInFwd -= b.Size // kept for the model's life, not across steps by zero_grad
			}
		}
	}
	ev.done = practicesOf(h)
	ev.noFrames = len(h.Snap.Frames) == 0
	ev.done.transformers = madeByTransformers(h, ev.index)
	for _, b := range h.LiveBlocks(ev.index) {
		switch {
		case b.Rule() == history.RuleGradMovedWithModel:
			ev.movedGrads += b.Size
		case b.Category != result.Gradient || b.Untracked:
		case b.Rule() == history.RuleDDPBucket:
			ev.ddpBuckets += b.Size
		default:
			ev.bucketedGrads += b.Size
		}
	}
	ev.gradsInFwd = max(0, ev.gradsInFwd-ev.movedGrads)
	if o := ev.oom; o != nil {
		// What the process could use: its blocks, its cached free memory
		// and what the device still had.
		usable := o.AllocatedBytes + o.Fragmentation.CachedFreeBytes + o.DeviceFreeBytes
		states := ev.cats[result.Parameter] + ev.cats[result.Gradient] + ev.cats[result.OptimizerState]
		ev.StatesFirst = states > 0 && usable-states < o.RequestedBytes
	}
	if len(h.Snap.GradAccumulations) > 0 {
		ev.fp32 = true
		for _, g := range h.Snap.GradAccumulations {
			if g.DType != "float" {
				ev.fp32 = false
				break
			}
		}
	}
	return ev
}

// trainingEvidence decides whether the run trains and whether it has a
// backward (evidence.training, evidence.backward).
func trainingEvidence(h *history.History, ev *Evidence, dr *result.DeviceResult) {
	// A step that ends (zero_grad, optimizer) after a forward without a
	// backward between them: the run trains without one (zeroth-order).
	forward, stepWithoutBackward := false, false
	for _, sp := range h.Phases.Spans {
		switch {
		case sp.Phase == result.PhaseBackward && sp.Events > 0:
			ev.Training, ev.Backward = true, true
		case sp.Phase == result.PhaseForward && sp.Events > 0:
			forward = true
		case sp.Phase == result.PhaseOptimizer || sp.Phase == result.PhaseZeroGrad:
			ev.Training = ev.Training || sp.Phase == result.PhaseZeroGrad || sp.Events > 0
			stepWithoutBackward = stepWithoutBackward || forward
		}
	}
	cats := []result.Categories{dr.Peak.Categories, dr.AtEnd.Categories}
	if dr.OOM != nil {
		cats = append(cats, dr.OOM.Categories)
	}
	for _, c := range cats {
		if c[result.Gradient] > 0 {
			ev.Training, ev.Backward = true, true
		}
		if c[result.OptimizerState] > 0 {
			ev.Training = true
		}
	}
	if f := h.FrameTexts().TrainingFrame(); f != "" {
		ev.Training, ev.TrainedBy = true, f
	}
	if ev.Training && !ev.Backward && !stepWithoutBackward && ev.phase == result.PhaseForward {
		// Cut off in its forward, before the backward: by the OOM, or by the
		// end of the recording (every later event still in forward).
		ev.Backward = true
		for k := max(ev.index, 0); ev.oom == nil && k < h.NumEvents(); k++ {
			if h.Phases.At(k) != result.PhaseForward {
				ev.Backward = false
				break
			}
		}
	}
}
