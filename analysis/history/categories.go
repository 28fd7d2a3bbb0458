package history

import (
	"github.com/torchmem/torchmem/internal/beside"
	"sort"
	"strings"

	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// Classification rules: every block gets a category from one rule, named
// here, with a confidence. Rules combine the phase at allocation and at
// free, lifetimes, stack markers, and size pairing (a gradient has the size
// of its parameter; AdamW keeps two tensors of that size per parameter).
const (
	RuleCublasWorkspace         = "cublas_workspace"                        // cuBLAS handle workspace (frames)
	RuleOptimizerKept           = "allocated_in_optimizer_step_kept"        // alloc in optimizer.step, alive after it
	RuleIntraOp                 = "intra_op_temporary"                      // chrome trace: allocated and freed inside one op (PyTorch's "intermediates")
	RuleOptimizerScratch        = "optimizer_scratch"                       // alloc and free within optimizer.step
	RuleFreedByZeroGrad         = "freed_by_zero_grad"                      // set_to_none frees .grad
	RuleAccumulateGrad          = "accumulate_grad"                         // AccumulateGrad frames, alive after backward
	RuleBackwardKeptPaired      = "backward_kept_paired_with_parameter"     // alloc in backward, alive after it, size of a parameter
	RuleBackwardKept            = "backward_kept"                           // alloc in backward, alive after it (no pairing possible)
	RuleBackwardKeptUnpaired    = "backward_kept_unpaired"                  // alive after backward, size of no parameter
	RuleBackwardScratch         = "backward_scratch"                        // alloc and free within backward
	RuleSavedForBackward        = "forward_freed_in_backward"               // saved activations
	RuleForwardTransient        = "forward_transient"                       // alloc and free within the same forward span
	RuleForwardLiveAtOOM        = "forward_live_at_oom"                     // allocated in forward, still live when the OOM struck
	RuleForwardKept             = "forward_kept"                            // forward outputs kept past forward (logits, loss, inference outputs)
	RuleCopiedToDevice          = "copied_to_device"                        // Tensor.to / batch transfer outside forward and backward
	RuleDataLoading             = "data_loading"                            // allocated while loading a batch
	RuleBeforeForwardPaired     = "allocated_before_forward_paired"         // model init in the recording, size of a gradient
	RuleOutsidePhases           = "allocated_outside_phases"                // no phase known
	RuleBatchThroughForward     = "made_before_forward_read_through_it"     // outside the phases, live across the next forward: its batch
	RuleModelSetup              = "model_setup"                             // Module.to/_apply, parameter init, state loading
	RulePreOptimizerFrames      = "preexisting_optimizer_frames"            // before recording, optimizer frames
	RulePreBackwardFrames       = "preexisting_backward_frames"             // before recording, autograd frames
	RulePreForwardFrames        = "preexisting_forward_frames"              // before recording, forward frames
	RulePreFreedInOptimizer     = "preexisting_freed_in_optimizer_step"     // old optimizer state replaced
	RulePreFreedInBackward      = "preexisting_freed_in_backward"           // activations of a forward before recording
	RulePreFreedInForward       = "preexisting_freed_in_forward"            // previous step's outputs replaced
	RulePreFreed                = "preexisting_freed"                       // freed, phase unknown
	RulePreParamPaired          = "preexisting_paired_with_gradient"        // before recording, never freed, size of a gradient
	RulePreParamPairedOptState  = "preexisting_paired_with_optimizer_state" // same, paired with optimizer state only
	RulePreOptimizerStatePaired = "preexisting_paired_as_optimizer_state"   // before recording, k per parameter of its size (k from the optimizer's class)
	RulePreUnpaired             = "preexisting_unpaired"                    // before recording, never freed, size of no gradient
	RulePreNeverFreed           = "preexisting_never_freed"                 // before recording, never freed, no training in the trace
	RuleProfilerCategory        = "pytorch_memory_profiler"                 // the category torch.profiler's memory timeline recorded
	RuleBaselineParameters      = "baseline_parameters_from_accumulate_grad"
	RuleBaselineGradients       = "baseline_gradients_kept"
	RuleBaselineOptimizerState  = "baseline_optimizer_state_estimate"
	RuleBaselineRest            = "baseline_untracked"
)

// blockFacts are the features of one block the rules read: 16 bytes (Classify
// keeps one a block while it decides, the peak of the analysis's memory on
// a long trace), the rarer yes/no facts as bits of one byte.
type blockFacts struct {
	m              *stackMarkers // the stack's, in h.markers (a pointer: a long trace has millions of blocks)
	pre            bool          // allocated before recording
	never          bool          // never freed
	ac, fc         uint8         // phase codes at alloc and free
	aliveAfterSpan bool          // outlives the phase span it was allocated in
	bits           factBits      // sameSpan, pastOOM, throughForward, intraOp
}

// factBits are the rarer facts of a block, one bit each.
type factBits uint8

const (
	sameSpan factBits = 1 << iota // freed in the span it was allocated in
	pastOOM                       // live at the OOM and never freed before it
	// throughForward: allocated outside the phases and live across the
	// whole of the next forward span (the batch the forward reads).
	throughForward
	intraOp // chrome trace: allocated and freed inside the same op (same thread, same span stack)
)

// is reports whether fact b holds.
func (f blockFacts) is(b factBits) bool { return f.bits&b != 0 }

// set records fact b when on holds.
func (f *blockFacts) set(b factBits, on bool) {
	if on {
		f.bits |= b
	}
}

func (h *History) facts(bi int) blockFacts {
	b := &h.Blocks[bi]
	p := h.Phases
	f := blockFacts{pre: b.Alloc < 0, never: b.Free < 0, m: h.Markers.ref(b.Stack)}
	if o := h.FirstOOM; o >= 0 && int(b.Alloc) < o && int(b.Free) > o {
		// Freed while the OutOfMemoryError unwound: the free says nothing
		// about what the block was; it lived to the OOM.
		f.never = true
	}
	if !f.pre {
		f.ac = p.Code[b.Alloc]
		if f.ac == codeUnknown || f.ac == codeData {
			f.set(throughForward, h.liveThroughNextForward(b))
		}
		f.aliveAfterSpan = f.never || int(b.Free) > p.phaseEnd(int(b.Alloc))
		f.set(sameSpan, !f.never && p.SpanAt(int(b.Free)) == p.SpanAt(int(b.Alloc)))
		f.set(pastOOM, h.FirstOOM >= 0 && int(b.Alloc) < h.FirstOOM && (b.Free < 0 || int(b.Free) > h.FirstOOM))
	}
	if !f.never {
		f.fc = p.Code[b.Free]
		if !f.pre && h.Snap.Source.Format == snapshot.FormatChromeTrace && b.Stack != 0 {
			ea, ef := &h.Device.Events[b.Alloc], &h.Device.Events[b.Free]
			f.set(intraOp, ea.Stack == ef.Stack && ea.Thread == ef.Thread && ea.Meta == ef.Meta && h.innermostIsOp(ea.Stack))
		}
	}
	return f
}

// Classify decides the category of every block of h (Phases must be set).
func Classify(h *History) {
	n := len(h.Blocks)
	facts := make([]blockFacts, n)
	for i := range h.Blocks {
		h.Markers.ref(h.Blocks[i].Stack) // the memo filled before both halves read it
	}
	inHalves(n, func(from, to int) {
		for i := from; i < to; i++ {
			facts[i] = h.facts(i)
		}
	})
	run := h.runFactsOf(facts)
	special := h.specialKinds(facts)

	// Candidates for size pairing.
	var gradCand []int32 // the most numerous: a gradient a parameter a step
	var paramCand, optCand []int
	firstForward := -1
	for i, c := range h.Phases.Code {
		if c == codeForward {
			firstForward = i
			break
		}
	}
	for i := range h.Blocks {
		b, f := &h.Blocks[i], &facts[i]
		if _, ok := special[i]; ok || f.m.cublas || f.m.kvCache || f.m.kvCacheCopy || b.Untracked {
			continue
		}
		switch {
		case !f.pre && f.ac == CodeBackward && f.aliveAfterSpan, !f.never && f.fc == codeZeroGrad, f.m.accumulateGrad:
			gradCand = append(gradCand, int32(i))
		case !f.pre && f.ac == codeOptimizer && f.aliveAfterSpan, f.pre && f.m.Hint == hintOptimizer,
			f.pre && !f.never && f.fc == codeOptimizer:
			optCand = append(optCand, i)
		case f.never && f.pre && f.m.Hint <= hintInit,
			!f.pre && f.m.init && f.ac != codeForward && f.ac != CodeBackward,
			f.never && !f.pre && f.ac == codeUnknown && !f.m.toDevice && (firstForward < 0 || int(b.Alloc) < firstForward):
			paramCand = append(paramCand, i)
		}
	}
	// The pairings by block, read once a block below: two bytes a block
	// instead of two map lookups, which cost more than the rest of the
	// loop on a long trace (the values are the small paired* constants).
	paired := make([][2]uint8, len(h.Blocks))
	paramPaired, pairing := pairSizes(h, gradCand, paramCand, optCand, run, paired)
	for i, v := range paramPaired {
		paired[i][0] = uint8(v)
	}

	inHalves(n, func(from, to int) {
		for i := from; i < to; i++ {
			b, f := &h.Blocks[i], &facts[i]
			if b.Untracked {
				continue // sized by estimateBaseline
			}
			if cat, ok := h.profilerCategory(i); ok {
				b.classify(cat, RuleProfilerCategory, result.High)
				continue
			}
			if d, ok := special[i]; ok {
				b.classify(d.cat, d.rule, d.conf)
				continue
			}
			b.classify(decide(f, b.Requested, int(paired[i][0]), int(paired[i][1]), pairing, run))
		}
	})
	markPerParameterCopies(h)
	transientsAtOOM(h)
	markAutocastCache(h)
	markDDPBucketsBySize(h)
	estimateBaseline(h)
}

// inHalves runs do over the blocks from..to of 0..n, the upper half on
// another core when n is large: do must write only what belongs to the
// blocks it is given, and read nothing the other half writes.
func inHalves(n int, do func(from, to int)) {
	if n < inHalvesBlocks {
		do(0, n)
		return
	}
	wait := beside.Go(func() { do(n/2, n) })
	do(0, n/2)
	wait()
}

// inHalvesBlocks is the fewest blocks inHalves splits: below, a goroutine
// costs more than the half it would take (a block takes some 50 ns).
const inHalvesBlocks = 1 << 14

// pairSizes pairs parameter candidates with gradients by size. The gradient
// reference is, per size, the largest count in any one step (a step makes
// one gradient per parameter); without gradients, optimizer state sizes are
// used. It returns which parameter candidates found a partner and whether
// pairing worked at all, and marks the gradient candidates that did in
// paired[block][1] (a byte a block: they are as many as the parameters
// times the steps).
func pairSizes(h *History, gradCand []int32, paramCand, optCand []int, run runFacts, paired [][2]uint8) (paramOK map[int]int, pairing int) {
	paramOK = map[int]int{}
	if len(paramCand) == 0 {
		return paramOK, 0
	}
	ref := map[int64]int{}
	source := pairedWithGradient
	if len(gradCand) > 0 {
		perStep := map[int]map[int64]int{}
		for _, gi := range gradCand {
			st := 0
			if a := h.Blocks[gi].Alloc; a >= 0 {
				st = h.Phases.StepAt(int(a))
			} else if f := h.Blocks[gi].Free; f >= 0 {
				st = h.Phases.StepAt(int(f)) - 1
			}
			if perStep[st] == nil {
				perStep[st] = map[int64]int{}
			}
			perStep[st][h.Blocks[gi].Requested]++
		}
		for _, m := range perStep {
			for sz, c := range m {
				ref[sz] = max(ref[sz], c)
			}
		}
	} else if len(optCand) > 0 {
		source = pairedWithOptimizerState
		ref = optimizerStateRef(h, optCand)
	} else {
		return paramOK, 0
	}
	order := append([]int(nil), paramCand...)
	sort.SliceStable(order, func(a, b int) bool {
		x, y := &h.Blocks[order[a]], &h.Blocks[order[b]]
		if x.Alloc != y.Alloc {
			return x.Alloc < y.Alloc
		}
		return x.Addr < y.Addr
	})
	paramSizes := map[int64]bool{}
	perSize := map[int64]int{}
	var left []int
	for _, pi := range order {
		sz := h.Blocks[pi].Requested
		if ref[sz] > 0 {
			ref[sz]--
			paramOK[pi] = source
			paramSizes[sz] = true
			perSize[sz]++
		} else {
			left = append(left, pi)
		}
	}
	// Optimizer state created before recording, without frames: with a
	// known optimizer keeping k tensors per parameter, k leftover blocks of
	// each parameter's size are its state.
	if k := h.optimizerFactor(); k > 0 && len(optCand) == 0 && source == pairedWithGradient {
		bySize := map[int64][]int{}
		for _, pi := range left {
			if h.Blocks[pi].Alloc < 0 {
				bySize[h.Blocks[pi].Requested] = append(bySize[h.Blocks[pi].Requested], pi)
			}
		}
		for sz, n := range perSize {
			if l := bySize[sz]; len(l) >= k*n {
				for _, pi := range l[:k*n] {
					paramOK[pi] = pairedAsOptimizerState
				}
			}
		}
	}
	if source == pairedWithOptimizerState && run.training {
		pairKeptGradients(h, left, perSize, paramOK)
	}
	if len(paramOK) == 0 {
		if source == pairedWithGradient {
			// Gradients and parameters are both known, and no size
			// matches: the backward survivors are not gradients of these
			// parameters (or the dtypes differ).
			return paramOK, pairingFailed
		}
		return paramOK, 0
	}
	for _, gi := range gradCand {
		if paramSizes[h.Blocks[gi].Requested] {
			paired[gi][1] = uint8(source)
		}
	}
	return paramOK, source
}

const (
	pairedWithGradient       = 1
	pairedWithOptimizerState = 2
	pairingFailed            = 3
	pairedAsOptimizerState   = 4
	pairedAsGradient         = 5
)

// decide applies the rules in order; the first that matches wins. size is
// the block's requested size.
func decide(f *blockFacts, size int64, paramPaired, gradPaired, pairing int, run runFacts) (result.Category, string, result.Confidence) {
	if c, r, conf, ok := decideKind(f); ok {
		return c, r, conf
	}
	switch {
	case !f.never && f.fc == codeZeroGrad:
		return result.Gradient, RuleFreedByZeroGrad, result.High
	case f.is(intraOp) && f.ac != codeOptimizer:
		return result.Temporary, RuleIntraOp, result.High
	}
	if f.m.init && (f.pre || f.ac != codeForward && f.ac != CodeBackward && f.ac != codeOptimizer) {
		return result.Parameter, RuleModelSetup, result.Medium
	}
	if !f.pre {
		switch f.ac {
		case codeOptimizer:
			if f.aliveAfterSpan {
				return result.OptimizerState, RuleOptimizerKept, result.High
			}
			return result.Temporary, RuleOptimizerScratch, result.High
		case CodeBackward:
			switch {
			case f.m.accumulateGrad && f.aliveAfterSpan:
				return result.Gradient, RuleAccumulateGrad, result.High
			case f.aliveAfterSpan && gradPaired != 0:
				return result.Gradient, RuleBackwardKeptPaired, result.High
			case f.aliveAfterSpan && pairing != 0:
				return result.Unknown, RuleBackwardKeptUnpaired, result.Low
			case f.aliveAfterSpan:
				return result.Gradient, RuleBackwardKept, result.Medium
			}
			return result.AutogradDetail, RuleBackwardScratch, result.Medium
		case codeForward:
			switch {
			case !f.never && f.fc == CodeBackward:
				return result.Activation, RuleSavedForBackward, result.High
			case f.is(sameSpan):
				return result.Temporary, RuleForwardTransient, result.Medium
			case f.is(pastOOM):
				return result.Activation, RuleForwardLiveAtOOM, result.Medium
			}
			return result.Activation, RuleForwardKept, result.Low
		case codeData:
			return result.InputData, RuleDataLoading, result.Medium
		case codeUnknown:
			if f.m.toDevice {
				return result.InputData, RuleCopiedToDevice, result.Medium
			}
			if f.is(throughForward) && !f.m.init && paramPaired == 0 {
				return result.InputData, RuleBatchThroughForward, result.Medium
			}
		}
		if paramPaired != 0 {
			return result.Parameter, RuleBeforeForwardPaired, result.Medium
		}
		return result.Unknown, RuleOutsidePhases, result.Low
	}
	// Allocated before recording began.
	switch f.m.Hint {
	case hintOptimizer:
		return result.OptimizerState, RulePreOptimizerFrames, result.High
	case hintBackward:
		if f.never || f.fc != CodeBackward {
			if f.m.accumulateGrad {
				return result.Gradient, RulePreBackwardFrames, result.High
			}
			return result.Gradient, RulePreBackwardFrames, result.Medium
		}
	}
	if !f.never {
		switch f.fc {
		case codeOptimizer:
			return result.OptimizerState, RulePreFreedInOptimizer, result.Medium
		case CodeBackward:
			return result.Activation, RulePreFreedInBackward, result.Medium
		case codeForward:
			return result.Activation, RulePreFreedInForward, result.Low
		}
		return result.Unknown, RulePreFreed, result.Low
	}
	switch {
	case f.m.Hint == hintForward:
		return result.Activation, RulePreForwardFrames, result.Low
	case paramPaired == pairedAsOptimizerState:
		return result.OptimizerState, RulePreOptimizerStatePaired, result.Medium
	case paramPaired == pairedWithGradient:
		return result.Parameter, RulePreParamPaired, result.High
	case paramPaired == pairedWithOptimizerState:
		return result.Parameter, RulePreParamPairedOptState, result.Medium
	case paramPaired == pairedAsGradient:
		return result.Gradient, RulePreGradPairedOpt, result.Medium
	}
	return decideUnexplained(f, size, pairing, run)
}

// CategoriesAt sums the live bytes of each category after event i.
func (h *History) CategoriesAt(i int) result.Categories {
	var c result.Categories
	for _, b := range h.LiveBlocks(i) {
		c[b.Category] += b.Size
	}
	return c
}

// RuleUses counts the bytes each rule decided among the blocks live after
// event i, largest first.
func (h *History) RuleUses(i int) []result.RuleUse {
	type key struct {
		rule string
		cat  result.Category
		conf result.Confidence
	}
	m := map[key]*result.RuleUse{}
	for _, b := range h.LiveBlocks(i) {
		k := key{b.Rule(), b.Category, b.Confidence()}
		u := m[k]
		if u == nil {
			u = &result.RuleUse{Rule: b.Rule(), Category: b.Category, Confidence: b.Confidence()}
			m[k] = u
		}
		u.Blocks++
		u.Bytes += b.Size
	}
	out := make([]result.RuleUse, 0, len(m))
	for _, u := range m {
		out = append(out, *u)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Bytes != out[b].Bytes {
			return out[a].Bytes > out[b].Bytes
		}
		return out[a].Rule < out[b].Rule
	})
	return out
}

// profilerCategories maps torch.profiler's category names to ours.
var profilerCategories = map[string]result.Category{
	"PARAMETER": result.Parameter, "OPTIMIZER_STATE": result.OptimizerState, "INPUT": result.InputData, "TEMPORARY": result.Temporary,
	"ACTIVATION": result.Activation, "GRADIENT": result.Gradient, "AUTOGRAD_DETAIL": result.AutogradDetail, "UNKNOWN": result.Unknown,
}

// profilerCategory returns the category a memory timeline recorded for a
// block ("category:NAME" metadata).
func (h *History) profilerCategory(bi int) (result.Category, bool) {
	m := h.blockMeta(bi)
	if m == 0 {
		return result.Unknown, false
	}
	name, ok := strings.CutPrefix(h.Snap.Strings[m], "category:")
	if !ok {
		return result.Unknown, false
	}
	c, ok := profilerCategories[name]
	return c, ok
}

// innermostIsOp reports whether the innermost frame of a chrome-trace stack
// is an operator span ("aten::mm", "c10d::allreduce_"), not an annotation,
// an autograd node or a compiled region.
func (h *History) innermostIsOp(st snapshot.StackID) bool {
	fs := h.Snap.StackOf(st)
	if len(fs) == 0 {
		return false
	}
	f := &h.Snap.Frames[fs[0]]
	n := f.Name
	return f.Filename == "" && strings.Contains(n, "::") && !strings.Contains(n, " ") &&
		!strings.HasPrefix(n, "autograd::engine::") && !strings.Contains(n, "CompiledFunction")
}

// liveThroughNextForward reports whether a block allocated outside the
// phases is live from the start to the end of the first forward span after
// its allocation: a batch made on the device (torch.randint(..., device=),
// a tokenizer's output moved earlier) that the forward reads.
func (h *History) liveThroughNextForward(b *Block) bool {
	spans := h.Phases.Spans
	k := sort.Search(len(spans), func(i int) bool { return spans[i].StartEvent > int(b.Alloc) })
	for ; k < len(spans); k++ {
		if sp := &spans[k]; sp.Phase == result.PhaseForward && sp.Events > 0 {
			return b.LiveAt(sp.StartEvent) && b.LiveAt(sp.EndEvent)
		}
	}
	return false
}
