package leaks

import (
	"fmt"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// This file makes the step_growth finding: a steady rise of allocated memory
// at step starts that the other findings do not explain.

// growthFinding measures allocated memory at the start of every step after
// the first (and at the end of the last): a steady rise that the findings
// so far do not explain is step_growth. The rise is judged on the requested
// bytes, what the program holds (the allocator's unsplit rests of up to
// 1 MiB a block come and go with the layout, not with the program), and
// measured in allocator blocks.
func (sc *leakScan) growthFinding(found []result.Leak) (result.Leak, bool) {
	h := sc.h
	S := sc.steps
	var vals []int64
	at := []int{}
	for k := 1; k < len(S); k++ {
		at = append(at, S[k].Start-1)
	}
	at = append(at, S[len(S)-1].End)
	for _, i := range at {
		vals = append(vals, h.RequestedAt(i))
	}
	if len(vals) < minPatternSteps+1 {
		return result.Leak{}, false
	}
	var diffs []int64
	rises := 0
	var worstDrop int64
	for i := 1; i < len(vals); i++ {
		d := vals[i] - vals[i-1]
		diffs = append(diffs, d)
		if d > 0 {
			rises++
		}
		worstDrop = min(worstDrop, d)
	}
	total := vals[len(vals)-1] - vals[0]
	if total < minGrowthBytes || rises*4 < 3*len(diffs) || -worstDrop*4 > total {
		return result.Leak{}, false
	}
	if total = h.AllocatedAt(at[len(at)-1]) - h.AllocatedAt(at[0]); total <= 0 {
		return result.Leak{}, false
	}
	slope := total / int64(len(diffs))
	var explained int64
	for _, l := range found {
		if l.Kind == result.LeakRetainedGraph || l.Kind == result.LeakGrowingList {
			explained += l.BytesPerStep
		}
	}
	if float64(explained) >= explainedGrowth*float64(slope) {
		return result.Leak{}, false
	}
	// Which site grew most between the first and the last measure.
	from, to := S[1].Start-1, S[len(S)-1].End
	grow := map[string]int64{}
	cacheGrow := map[string]int64{}
	modelGrow := map[string]int64{} // grown inside a model call
	uses := history.StackUses(h.Device)
	cacheStacks, modelStacks := history.NewStackMemo(h.Snap, uses, stackInCache), history.NewStackMemo(h.Snap, uses, stackInModel)
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.Untracked {
			continue
		}
		a, z := b.LiveAt(from), b.LiveAt(to)
		if a == z {
			continue
		}
		s := sc.site(bi)
		if z {
			grow[s] += b.Size
			if cacheStacks.Get(b.Stack) {
				cacheGrow[s] += b.Size
			}
			if modelStacks.Get(b.Stack) {
				modelGrow[s] += b.Size
			}
		} else {
			grow[s] -= b.Size
		}
	}
	site, best := "", int64(0)
	for s, v := range grow {
		if v > best || v == best && s < site {
			site, best = s, v
		}
	}
	var ks []int
	for k := 1; k < len(S); k++ {
		ks = append(ks, k)
	}
	l := result.Leak{Kind: result.LeakStepGrowth, Device: h.Device.ID, Site: site, BytesPerStep: slope, Steps: len(diffs), TotalBytes: total,
		SeenInSteps: sc.stepNumbers(ks)}
	switch {
	case rises == len(diffs) && len(diffs) >= minPatternSteps+1 && total >= highLeakBytes && leakCV(diffs) <= 0.5:
		l.Confidence = result.High
	case total >= highLeakBytes:
		l.Confidence = result.Medium
	default:
		l.Confidence = result.Low
	}
	if l.Confidence == result.High && !sc.plan.HighConfidence() {
		l.Confidence = result.Medium // steps from the period of sites (allocated totals are exact even when lifetimes are guessed)
	}
	kvCache := site != "" && cacheGrow[site]*2 >= best
	// Without a backward, memory that grows inside the model's forward
	// step after step is what a key/value cache does while generating
	// (the user's own cache code need not say "cache").
	inModel := site != "" && !kvCache && !sc.backward && modelGrow[site]*2 >= best
	if kvCache || inModel {
		l.Confidence = result.Low // a cache growing with the sequence: expected while generating
	}
	first, last := S[1].N, S[len(S)-1].N
	l.Evidence = fmt.Sprintf("Allocated memory at the start of each step rose from %s at step %d to %s after step %d: %s per step, rising in %d of %d steps.",
		units.FormatBytes(vals[0]), first, units.FormatBytes(vals[len(vals)-1]), last, units.FormatBytes(slope), rises, len(diffs))
	if site != "" {
		l.Evidence += fmt.Sprintf(" Most of it (%s) is memory allocated at %s.", units.FormatBytes(best), site)
	}
	l.Explanation = "Memory rises at every step and no graph or list found above explains it: something keeps tensors alive from one step to the next."
	switch {
	case kvCache:
		l.Explanation = "It is allocated in cache code: a key/value cache that grows with the generated sequence is expected, not a leak, unless it is never reset between sequences."
	case inModel:
		l.Explanation = "It grows inside the model's forward in a loop without backward: a key/value cache that grows with the generated sequence is expected, not a leak, unless it is never reset between sequences."
	}
	l.Remedy = fmt.Sprintf("Find what keeps tensors alive from one step to the next (allocated at %s): a tensor accumulated with its graph (use .item() or .detach()), a list or dict of GPU tensors (.detach().cpu()), a buffer grown with torch.cat (preallocate or bound it), a cache that grows by design (cap it).",
		leakOrUnknown(site))
	l.Fix = l.Remedy + fmt.Sprintf(" Saves %s per step, %s so far.", units.FormatBytes(slope), units.FormatBytes(total))
	return l, true
}
