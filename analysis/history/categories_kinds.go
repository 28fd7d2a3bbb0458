package history

import (
	"fmt"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// Kinds of memory that PyTorch's categories name poorly, and memory that
// nothing in the file explains. A kind with a category of its own (KV
// cache, workspace) is told by its frames, or by a size PyTorch fixes; a
// kind that is a variant of a category keeps it under a rule of its own.
const (
	RuleModuleInit             = "module_init"                                      // torch/nn/modules/*.py __init__: a module's weights, wherever allocated
	RuleKVCache                = "kv_cache"                                         // vLLM's cache engine, transformers' cache_utils, SGLang's KV pools, past_key_values
	RuleKVCacheCopy            = "kv_cache_module_copy"                             // a copy of transformers' cache module under another name (cache_utils*.py)
	RuleCublasWorkspaceSize    = "cublas_workspace_size"                            // before recording, no frames, PyTorch's default cuBLAS workspace size
	RuleFrozenWeights          = "frozen_base_weights"                              // adapters (peft) train; the base weights get no gradient
	RuleQuantizedWeights       = "frozen_base_weights_quantized"                    // same, with bitsandbytes' quantized layers at work
	RulePreGradPairedOpt       = "preexisting_gradient_paired_with_optimizer_state" // before recording, never freed, the second block of a parameter's size (no zero_grad)
	RuleNoEvidence             = "no_frames_no_history"                             // the dump's state alone, no frames: nothing tells what it is
	RulePreWeightNoGradientYet = "preexisting_weight_before_its_gradient"           // before recording, never freed, backward died at an OOM before its gradient
)

// CublasWorkspaceSize is PyTorch's default cuBLAS workspace before Hopper
// (CUBLAS_WORKSPACE_CONFIG unset: ":4096:2:16:8" = 2×4096 KiB + 8×16 KiB),
// a size no tensor is likely to have. Hopper's default, 8×4096 KiB, is a
// power of two that many tensors share: frames must tell that one.
const CublasWorkspaceSize = 2*4096<<10 + 8*16<<10

// maxWorkspaces bounds how many blocks of that size, without frames, are
// taken for workspaces: cuBLAS keeps one per handle and stream, a device
// uses a few; more of them are tensors of that size.
const maxWorkspaces = 4

// runFacts are what the whole device says about its blocks.
type runFacts struct {
	training  bool // a backward or optimizer phase ran
	noHistory bool // no allocation in the trace: only the dump's state is known
	quantized bool // bitsandbytes' quantized layers in the stacks
	adapters  bool // peft's adapters in the stacks
	// workspaceSized: blocks from before the trace, never freed, without
	// frames, of a default cuBLAS workspace size are few enough to be
	// workspaces; ltWorkspaces: those of cuBLASLt's default size are no
	// more than them (each handle's first cuBLASLt matmul takes one).
	workspaceSized map[int64]bool
	ltWorkspaces   bool
	// oomBackward: the run died at an OOM in backward, before every
	// gradient was made.
	oomBackward bool
}

// runFactsOf gathers the device-wide facts from the phases and the blocks'
// stack markers.
func (h *History) runFactsOf(facts []blockFacts) runFacts {
	r := runFacts{noHistory: true}
	r.oomBackward = h.FirstOOM >= 0 && h.Phases.Code[h.FirstOOM] == CodeBackward
	for _, c := range h.Phases.Code {
		if c == CodeBackward || c == codeOptimizer {
			r.training = true
			break
		}
	}
	bySize := map[int64]int{}
	for i := range h.Blocks {
		b := &h.Blocks[i]
		if b.Alloc >= 0 {
			r.noHistory = false
		}
		r.quantized = r.quantized || facts[i].m.quantizedWeights
		r.adapters = r.adapters || facts[i].m.peft
		if b.Alloc < 0 && b.Free < 0 && !facts[i].m.hasFrames {
			bySize[b.Requested]++
		}
	}
	r.workspaceSized = map[int64]bool{}
	n := 0
	for _, w := range cublasWorkspaceSizes {
		r.workspaceSized[w] = bySize[w] <= maxWorkspaces
		n += bySize[w]
	}
	r.ltWorkspaces = bySize[cublasLtWorkspaceSize] <= n
	return r
}

// decideKind applies the rules that hold whatever the phase: a KV cache,
// a library workspace, a module's weights.
func decideKind(f *blockFacts) (result.Category, string, result.Confidence, bool) {
	switch {
	case f.m.cublas:
		return result.Workspace, RuleCublasWorkspace, result.High, true
	case f.m.kvCache:
		return result.KVCache, RuleKVCache, result.High, true
	case f.m.kvCacheCopy:
		// The name says transformers' cache module, the path says a copy
		// of it that the project may have changed.
		return result.KVCache, RuleKVCacheCopy, result.Medium, true
	case f.m.moduleInit:
		return result.Parameter, RuleModuleInit, result.High, true
	}
	return 0, "", "", false
}

// decideUnexplained classifies a block allocated before recording, never
// freed, that no frame and no pairing explains.
func decideUnexplained(f *blockFacts, size int64, pairing int, run runFacts) (result.Category, string, result.Confidence) {
	switch {
	case !f.m.hasFrames && size == CublasWorkspaceSize && run.workspaceSized[size]:
		return result.Workspace, RuleCublasWorkspaceSize, result.Low
	case run.training && run.oomBackward && pairing == pairedWithGradient && f.m.Hint <= hintInit:
		// Backward died before it made these weights' gradients: nothing
		// to pair them with yet, but weights all the same.
		return result.Parameter, RulePreWeightNoGradientYet, result.Medium
	case !f.m.hasFrames && run.training && (pairing == pairedWithGradient || pairing == pairedWithOptimizerState) &&
		(run.workspaceSized[size] || size == cublasLtWorkspaceSize && run.ltWorkspaces):
		// Hopper's 32 MiB is a size tensors share: only where the run's
		// weights are known (paired) and these are none of them.
		return result.Workspace, RuleCublasWorkspaceSize, result.Low
	case run.training && (pairing == pairedWithGradient || pairing == pairedWithOptimizerState):
		// The run trains some weights and not these.
		switch {
		case run.quantized:
			return result.Parameter, RuleQuantizedWeights, result.Medium
		case run.adapters:
			return result.Parameter, RuleFrozenWeights, result.Medium
		}
		return result.Unknown, RulePreUnpaired, result.Low
	case run.noHistory && !f.m.hasFrames:
		return result.Unknown, RuleNoEvidence, result.Low
	}
	return result.Parameter, RulePreNeverFreed, result.Low
}

// optimizerStateRef is how many parameters of each size the optimizer state
// stands for: with an optimizer that keeps k tensors per parameter (AdamW:
// 2), a size's state blocks live at one time (before the trace, or at its
// end) over k; unlimited when k is unknown.
func optimizerStateRef(h *History, optCand []int) map[int64]int {
	ref := map[int64]int{}
	k := h.optimizerFactor()
	if k <= 0 {
		for _, oi := range optCand {
			ref[h.Blocks[oi].Requested] = 1 << 30
		}
		return ref
	}
	atStart, atEnd := map[int64]int{}, map[int64]int{}
	for _, oi := range optCand {
		b := &h.Blocks[oi]
		if b.Alloc < 0 {
			atStart[b.Requested]++
		}
		if b.Free < 0 {
			atEnd[b.Requested]++
		}
	}
	for sz, n := range atStart {
		ref[sz] = max(ref[sz], n/k)
	}
	for sz, n := range atEnd {
		ref[sz] = max(ref[sz], n/k)
	}
	return ref
}

// pairKeptGradients: a training run whose gradients are neither made in
// backward nor freed by zero_grad accumulates into .grad tensors from
// before the recording (no zero_grad). Beside each parameter paired with
// optimizer state, a second block of its size from before the recording,
// never freed, is its gradient. left holds the unpaired candidates in
// address order (a parameter is allocated before its gradient: the lower
// address is a tie-break among blocks of one size, not evidence).
func pairKeptGradients(h *History, left []int, params map[int64]int, paired map[int]int) {
	for _, pi := range left {
		b := &h.Blocks[pi]
		if b.Alloc >= 0 || b.Free >= 0 || params[b.Requested] == 0 {
			continue
		}
		params[b.Requested]--
		paired[pi] = pairedAsGradient
	}
}

// KindsDiagnostics says, from the rules that decided the end state, what
// the kinds rules took for what, and what nothing explains.
func KindsDiagnostics(id int, rules []result.RuleUse) []result.Diagnostic {
	var out []result.Diagnostic
	for _, u := range rules {
		var kind, msg string
		switch u.Rule {
		case RuleNoEvidence:
			kind, msg = "no_frames_no_history", fmt.Sprintf(
				"device %d: %d blocks (%s) have neither frames nor history (they were allocated before recording, or recorded without stacks): nothing tells what they are, so they count as unknown — record with torch.cuda.memory._record_memory_history() before building the model to see their stacks", id, u.Blocks, units.FormatBytes(u.Bytes))
		case RuleQuantizedWeights, RuleFrozenWeights:
			what := "adapters (peft)"
			if u.Rule == RuleQuantizedWeights {
				what = "bitsandbytes' quantized layers"
			}
			kind, msg = "frozen_base_weights", fmt.Sprintf(
				"device %d: %d blocks (%s) from before the recording get no gradient while the run trains with %s: they are the frozen base weights, counted as parameters", id, u.Blocks, units.FormatBytes(u.Bytes), what)
		case RulePerParameterCopies:
			kind, msg = "per_parameter_copies", perParameterCopiesNote(id, u)
		case RuleCublasWorkspaceSize:
			kind, msg = "workspace_by_size", fmt.Sprintf(
				"device %d: %d blocks (%s) from before the recording, without frames, have the size of PyTorch's default cuBLAS workspaces (8,519,680 B; 32 MiB on Hopper, with cuBLASLt's 1 MiB) and are no weight of the run: counted as workspace", id, u.Blocks, units.FormatBytes(u.Bytes))
		default:
			continue
		}
		out = append(out, result.Diagnostic{Kind: kind, Device: id, Message: msg})
	}
	return out
}
