package history

import (
	"sort"

	"github.com/torchmem/torchmem/result"
)

// RuleDDPBucket classifies DistributedDataParallel's gradient buckets: the
// Reducer keeps, besides each parameter's .grad, flat buffers holding the
// gradients of groups of parameters for the all-reduce (at::empty of the
// group's element count in c10d::Reducer::initialize_buckets). With
// find_unused_parameters off it makes one bucket of every gradient at
// construction and, at the start of the second iteration's forward,
// rebuilds them in the order the gradients became ready: the first bucket
// about 1 MiB, the others about bucket_cap_mb (25 MiB) — each a run of
// whole parameters, so together they hold exactly one iteration's
// gradients. They are gradient memory, kept for the model's life.
const RuleDDPBucket = "ddp_gradient_bucket"

// ddpBucketsByFrames classifies into out the blocks whose frames show the
// Reducer making its buckets and that outlive a backward (the rebuild also
// broadcasts the new bucket assignment in small tensors freed at once).
func (h *History) ddpBucketsByFrames(facts []blockFacts, out map[int]decision) {
	var bwd []result.PhaseSpan
	for i := range facts {
		if !facts[i].m.ddpBucket || facts[i].pre {
			continue
		}
		if bwd == nil {
			bwd = backwardSpans(h)
		}
		if outlivesBackward(bwd, &h.Blocks[i]) {
			out[i] = decision{result.Gradient, RuleDDPBucket, result.High}
		}
	}
}

// markDDPBucketsBySize finds DDP's buckets where no frame names the
// Reducer (the user's frames only, or none), among the blocks classified
// so far as activation, input or unknown: a run of consecutive
// allocations, each made outside backward and the optimizer and outliving
// a whole backward, that opens either before the first forward (the
// Reducer's construction) or in a forward span while nothing the span
// allocated is still allocated (the rebuild, before the forward's own
// work), and whose requested bytes add up exactly to the gradients one
// backward makes (the most any backward span makes) — or, where backward
// keeps no gradient, to the parameters (bucketViewGradients). Without
// either nothing tells a bucket apart, nor with a single gradient: the
// weight itself, its optimizer state or a copy would have its size.
func markDDPBucketsBySize(h *History) {
	bwd := backwardSpans(h)
	grads, n := gradientBytesPerBackward(h, bwd)
	if n == 0 {
		grads, n = bucketViewGradients(h, bwd)
	}
	if n < 2 {
		return
	}
	p := h.Phases
	firstForward := len(p.Code)
	for i, c := range p.Code {
		if c == codeForward {
			firstForward = i
			break
		}
	}
	type member struct {
		block int32
		opens bool // may be a bucket set's first block
	}
	var run []member
	mark := func() {
		for s := 0; s < len(run); s++ {
			if !run[s].opens {
				continue
			}
			var sum int64
			e := s
			for ; e < len(run) && sum < grads; e++ {
				sum += h.Blocks[run[e].block].Requested
			}
			if sum != grads {
				continue
			}
			for k := s; k < e; k++ {
				b := &h.Blocks[run[k].block]
				b.classify(result.Gradient, RuleDDPBucket, result.Medium)
			}
			s = e - 1
		}
		run = run[:0]
	}
	// The span of the allocations seen last, its first event, and how many
	// of its allocations are still allocated.
	span, spanStart, liveInSpan := -2, 0, 0
	spans := spanCursor{p: p}
	after := 0 // the backward spans that start at or before event i
	for i := range h.Device.Events {
		if bi := h.EndAt(i); bi >= 0 && int(h.Blocks[bi].Alloc) >= spanStart {
			liveInSpan--
		}
		bi := h.OpenAt(i)
		if bi < 0 {
			continue
		}
		if sp := spans.at(i); sp != span {
			span, spanStart, liveInSpan = sp, i, 0
		}
		liveInSpan++
		for after < len(bwd) && bwd[after].StartEvent <= i {
			after++
		}
		var next *result.PhaseSpan // the first backward span after the allocation
		if after < len(bwd) {
			next = &bwd[after]
		}
		if !ddpBucketCandidate(h, next, &h.Blocks[bi]) {
			mark()
			continue
		}
		c := p.Code[i]
		opens := i < firstForward && (c == codeUnknown || c == codeData) || c == codeForward && liveInSpan == 1
		run = append(run, member{bi, opens})
	}
	mark()
}

// ddpBucketCandidate reports whether a block may be one of DDP's buckets
// that the general rules took for something else: allocated in the
// recording outside backward and the optimizer, outliving a backward, and
// classified as activation, input or unknown. next is the first backward
// span that starts after the block's allocation (nil: none does).
func ddpBucketCandidate(h *History, next *result.PhaseSpan, b *Block) bool {
	if b.Untracked || b.Alloc < 0 || b.Requested <= 0 || b.Rule() == RulePerParameterCopies {
		return false // a copy of each parameter (an EMA) sums to the gradients too
	}
	switch b.Category {
	case result.Activation, result.InputData, result.Unknown:
	default:
		return false
	}
	switch h.Phases.Code[b.Alloc] {
	case CodeBackward, codeOptimizer, codeZeroGrad:
		return false
	}
	return next != nil && outlives(next, b)
}

// backwardSpans are the backward spans with events, in event order.
func backwardSpans(h *History) []result.PhaseSpan {
	var out []result.PhaseSpan
	for _, sp := range h.Phases.Spans {
		if sp.Phase == result.PhaseBackward && sp.StartEvent >= 0 {
			out = append(out, sp)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].StartEvent < out[b].StartEvent })
	return out
}

// outlivesBackward reports whether a block allocated in the recording
// stays allocated through a whole backward span that starts after it.
func outlivesBackward(bwd []result.PhaseSpan, b *Block) bool {
	k := sort.Search(len(bwd), func(k int) bool { return bwd[k].StartEvent > int(b.Alloc) })
	if k == len(bwd) {
		return false
	}
	return outlives(&bwd[k], b)
}

// outlives reports whether a block stays allocated through the whole span
// sp (one that starts after its allocation).
func outlives(sp *result.PhaseSpan, b *Block) bool {
	return b.Free < 0 || sp.EndEvent < int(b.Free)
}

// spanOf is the index of the span of bwd (in event order) that holds event
// i, −1 when none does.
func spanOf(bwd []result.PhaseSpan, i int) int {
	k := sort.Search(len(bwd), func(k int) bool { return bwd[k].EndEvent >= i })
	if k == len(bwd) || bwd[k].StartEvent > i {
		return -1
	}
	return k
}

// gradientBytesPerBackward is the most requested bytes of gradients one
// backward span makes — one iteration's gradients — and how many
// gradients make it up (0, 0 when backward makes none).
func gradientBytesPerBackward(h *History, bwd []result.PhaseSpan) (bytes int64, n int) {
	type sum struct {
		bytes int64
		n     int
	}
	per := make([]sum, len(bwd))
	for i := range h.Blocks {
		b := &h.Blocks[i]
		if b.Category != result.Gradient || b.Rule() == RuleDDPBucket || b.Alloc < 0 || b.Untracked {
			continue
		}
		k := spanOf(bwd, int(b.Alloc))
		if k < 0 {
			continue
		}
		per[k].bytes += b.Requested
		per[k].n++
		if per[k].bytes > bytes {
			bytes, n = per[k].bytes, per[k].n
		}
	}
	return bytes, n
}

// bucketViewGradients is the parameters' requested bytes and count when
// backward keeps no gradient yet makes one of every parameter's size and
// frees it within the same backward span: DistributedDataParallel with
// gradient_as_bucket_view=True, whose Reducer copies each gradient into
// its bucket as autograd makes it and makes .grad a view of the bucket,
// so that the buckets are the only gradients kept. It is 0, 0 when any
// backward keeps a gradient, or when no backward made every parameter's
// gradient (frozen weights: the buckets hold the trained ones only, which
// nothing here tells apart).
func bucketViewGradients(h *History, bwd []result.PhaseSpan) (bytes int64, n int) {
	if len(bwd) == 0 {
		return 0, 0
	}
	slot := map[int64]int{} // a parameter size's index in need
	var need []int          // parameters of each size
	for i := range h.Blocks {
		b := &h.Blocks[i]
		if b.Category != result.Parameter || b.Untracked || b.Requested <= 0 {
			continue
		}
		k, ok := slot[b.Requested]
		if !ok {
			k = len(need)
			slot[b.Requested] = k
			need = append(need, 0)
		}
		need[k]++
		bytes += b.Requested
		n++
	}
	if n < 2 {
		return 0, 0
	}
	// made[span][size]: blocks of a parameter's size that a backward span
	// allocated and freed.
	made := make([][]int, len(bwd))
	for i := range h.Blocks {
		b := &h.Blocks[i]
		if b.Alloc < 0 || b.Untracked {
			continue
		}
		k := spanOf(bwd, int(b.Alloc))
		if k < 0 {
			continue
		}
		s, ok := slot[b.Requested]
		if !ok || b.Free < 0 || int(b.Free) > bwd[k].EndEvent {
			continue
		}
		if made[k] == nil {
			made[k] = make([]int, len(need))
		}
		made[k][s]++
	}
	for _, m := range made {
		if m != nil && madeEvery(m, need) {
			return bytes, n
		}
	}
	return 0, 0
}

// madeEvery reports whether made holds at least need of every size.
func madeEvery(made, need []int) bool {
	for j, c := range need {
		if made[j] < c {
			return false
		}
	}
	return true
}
