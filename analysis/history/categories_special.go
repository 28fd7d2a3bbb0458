package history

import (
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// RuleGradMovedWithModel classifies the gradients Module.to()/.cuda()
// moves with the model after a step: torch/nn/modules/module.py _apply
// copies each parameter at one line and, right after it, the parameter's
// .grad — a block of the same size — at another.
const RuleGradMovedWithModel = "gradient_moved_with_model"

// movedGradients finds the gradients that Module.to moved: the blocks made
// in _apply at a line whose every allocation comes right after one of the
// same size at the parameters' line (the line most blocks of _apply were
// made at). A module's buffers, moved at a third line after its
// parameters, follow one another and fail the test. Without Python frames
// nothing tells a moved gradient from its parameter.
func movedGradients(h *History, facts []blockFacts) map[int]bool {
	ev := h.Device.Events
	type alloc struct{ ev, block int }
	var seq []alloc // allocations in _apply, in order, and the one before each
	count := map[int64]int{}
	for i := range ev {
		if ev[i].Action != snapshot.ActionAlloc {
			continue
		}
		if bi := h.OpenAt(i); bi >= 0 && facts[bi].m.applyLine != 0 {
			seq = append(seq, alloc{i, int(bi)})
			count[facts[bi].m.applyLine]++
		}
	}
	if len(count) < 2 {
		return nil
	}
	var paramLine int64
	for l, n := range count {
		if n > count[paramLine] || n == count[paramLine] && l < paramLine {
			paramLine = l
		}
	}
	// A line is the gradients' when each of its allocations directly
	// follows (no other allocation between) one at the parameters' line of
	// the same requested size.
	gradLine := map[int64]bool{}
	for l := range count {
		gradLine[l] = l != paramLine
	}
	for k, a := range seq {
		l := facts[a.block].m.applyLine
		if l == paramLine || !gradLine[l] {
			continue
		}
		ok := k > 0 && seq[k-1].ev == prevAllocEvent(h, a.ev)
		if ok {
			p := seq[k-1].block
			ok = facts[p].m.applyLine == paramLine && h.Blocks[p].Requested == h.Blocks[a.block].Requested
		}
		if !ok {
			gradLine[l] = false
		}
	}
	out := map[int]bool{}
	for _, a := range seq {
		if gradLine[facts[a.block].m.applyLine] {
			out[a.block] = true
		}
	}
	return out
}

// prevAllocEvent is the allocation event before event i (−1).
func prevAllocEvent(h *History, i int) int {
	for j := i - 1; j >= 0; j-- {
		if h.Device.Events[j].Action == snapshot.ActionAlloc {
			return j
		}
	}
	return -1
}

// Rules for the buffers of training frameworks (Megatron-LM, and verl on
// it): the distributed data-parallel gradient buffer is gradients, the
// parameter buffer beside it parameters, and the distributed optimizer's
// fp32 main parameters optimizer state (master weights).
const (
	RuleFrameworkGradBuffer  = "framework_grad_buffer"
	RuleFrameworkParamBuffer = "framework_param_buffer"
	RuleFrameworkMainParams  = "framework_main_params"
)

// frameworkBuffers classifies the blocks of Megatron's buffers into out:
// in param_and_grad_buffer.py the gradient buffer is allocated at the last
// of its lines (after the parameter buffer, when there is one); a function
// named for the main parameters makes the optimizer's fp32 copies.
func frameworkBuffers(facts []blockFacts, out map[int]decision) {
	last := int64(0)
	for i := range facts {
		last = max(last, facts[i].m.bufferLine)
	}
	for i := range facts {
		switch m := facts[i].m; {
		case m.bufferLine == last && last > 0:
			out[i] = decision{result.Gradient, RuleFrameworkGradBuffer, result.High}
		case m.bufferLine > 0:
			out[i] = decision{result.Parameter, RuleFrameworkParamBuffer, result.High}
		case m.mainParams:
			out[i] = decision{result.OptimizerState, RuleFrameworkMainParams, result.High}
		}
	}
}

// decision is a block's category, the rule that decided it and its
// confidence.
type decision struct {
	cat  result.Category
	rule string
	conf result.Confidence
}

// specialKinds decides the blocks that a rule of their own explains before
// the general rules of phases, lifetimes and pairing run (and that pairing
// must not take for weights or gradients): frameworks' buffers (Megatron's,
// sharded data parallelism's), DDP's
// gradient buckets, CUDA graphs' pools, gradients moved with the model and
// cuBLAS workspaces, the later taking precedence.
func (h *History) specialKinds(facts []blockFacts) map[int]decision {
	out := map[int]decision{}
	frameworkBuffers(facts, out)
	shardedBuffers(h, facts, out)
	h.ddpBucketsByFrames(facts, out)
	for bi := range graphPoolBlocks(h) {
		if !facts[bi].m.cublas {
			out[bi] = decision{result.CUDAGraphPool, RuleCUDAGraphPool, result.High}
		}
	}
	for bi := range movedGradients(h, facts) {
		out[bi] = decision{result.Gradient, RuleGradMovedWithModel, result.High}
	}
	for bi := range workspaceBlocks(h, facts) {
		out[bi] = decision{result.Workspace, RuleCublasWorkspaceFirstMatmul, result.Medium}
	}
	return out
}

// RuleForwardTransientAtOOM classifies a block made in forward and live
// when the OOM struck whose siblings — the blocks of its stack and size
// made in forward before — were all freed in the forward span that made
// them: a temporary in use when the allocation failed, not an activation.
// Identical tensors made the same way get the same category.
const RuleForwardTransientAtOOM = "forward_transient_live_at_oom"

// transientsAtOOM gives the forward blocks live at the OOM the category of
// their siblings when every sibling was a forward temporary.
func transientsAtOOM(h *History) {
	type key struct {
		stack snapshot.StackID
		size  int64
	}
	live := map[key][]int{}
	for i := range h.Blocks {
		if b := &h.Blocks[i]; b.Rule() == RuleForwardLiveAtOOM && len(h.Snap.StackOf(b.Stack)) > 0 {
			k := key{b.Stack, b.Requested}
			live[k] = append(live[k], i)
		}
	}
	if len(live) == 0 {
		return
	}
	transient := map[key]bool{} // every sibling so far a forward temporary
	for i := range h.Blocks {
		b := &h.Blocks[i]
		k := key{b.Stack, b.Requested}
		if _, ok := live[k]; !ok || b.Rule() == RuleForwardLiveAtOOM {
			continue
		}
		t, seen := transient[k]
		transient[k] = (t || !seen) && b.Rule() == RuleForwardTransient
	}
	for k, blocks := range live {
		if !transient[k] {
			continue
		}
		for _, i := range blocks {
			b := &h.Blocks[i]
			b.classify(result.Temporary, RuleForwardTransientAtOOM, result.Medium)
		}
	}
}
