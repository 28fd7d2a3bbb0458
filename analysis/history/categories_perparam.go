package history

import (
	"fmt"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// RulePerParameterCopies classifies tensors made outside forward, backward
// and the optimizer step, one for each parameter with its size, and kept
// across forwards: state the training keeps per weight (an EMA's shadow
// weights, a custom optimizer's or a gradient estimator's statistics) —
// not the batch a forward reads, which the rule for blocks made before a
// forward would take them for. What they are beyond that the file does
// not say: unknown, with a note.
const RulePerParameterCopies = "per_parameter_copies"

// markPerParameterCopies reclassifies, call site by call site, the blocks
// taken for a batch that are a copy of the parameters' sizes: at least
// four, each of a parameter's size and no size more often than the
// parameters live when the site made its first have it, together at least
// half those parameters' bytes.
func markPerParameterCopies(h *History) {
	sites := map[snapshot.StackID][]int{}
	for i := range h.Blocks {
		if b := &h.Blocks[i]; b.Category == result.InputData && b.Rule() == RuleBatchThroughForward {
			sites[b.Stack] = append(sites[b.Stack], i)
		}
	}
	for _, blocks := range sites {
		if len(blocks) < 4 {
			continue
		}
		first := h.Blocks[blocks[0]].Alloc
		for _, i := range blocks {
			first = min(first, h.Blocks[i].Alloc)
		}
		params := map[int64]int{}
		var paramBytes int64
		for _, b := range h.LiveBlocks(int(first)) {
			if b.Category == result.Parameter {
				params[b.Requested]++
				paramBytes += b.Requested
			}
		}
		sizes := map[int64]int{}
		var bytes int64
		ok := paramBytes > 0
		for _, i := range blocks {
			n := h.Blocks[i].Requested
			sizes[n]++
			bytes += n
			ok = ok && sizes[n] <= params[n]
		}
		if !ok || 2*bytes < paramBytes {
			continue
		}
		for _, i := range blocks {
			h.Blocks[i].classify(result.Unknown, RulePerParameterCopies, result.Medium)
		}
	}
}

// perParameterCopiesNote says what the rule took for what.
func perParameterCopiesNote(id int, u result.RuleUse) string {
	return fmt.Sprintf("device %d: %d blocks (%s) were made outside forward, backward and the optimizer step, one for each parameter with its size, and kept across steps: state the training keeps per weight (an EMA's shadow weights, a custom optimizer's or estimator's statistics), not a batch — counted as unknown",
		id, u.Blocks, units.FormatBytes(u.Bytes))
}
