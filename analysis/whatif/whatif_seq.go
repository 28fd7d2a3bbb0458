package whatif

import (
	"strings"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// seqSquared marks the blocks whose tensors have two sequence dimensions
// (query × key: attention scores, their softmax and dropout, causal masks)
// and so grow with the square of the sequence length; every other tensor
// of a step, attention code's per-token tensors included (queries, keys,
// values, rotary outputs, the attention output), grows linearly.
//
// Nothing in a snapshot gives a tensor's shape, so the rule reads the
// structure of an attention call: the allocations made in a row by
// unfused attention code (a frame named for attention, not a fused
// kernel) end with the call's output, a per-token tensor of batch × seq ×
// heads × head_dim. A tensor of the call larger than that output can only
// hold a dimension the output does not have: the second sequence
// dimension (scores are seq ÷ head_dim times the output's size; GPT-2's
// fused QKV projection, three times, is made outside the attention
// function). A tensor made by a function named for a mask in attention
// code is query × key too. With the sequence length known (seq > 0), a
// seq² tensor must also be a multiple of seq² bytes.
//
// The autograd engine's tensors in backward have no frames: a backward
// block takes the forward's verdict by its size, when only seq² tensors of
// forward had that size (a size shared with a per-token tensor — say the
// scores of 16 heads at seq 256 and an MLP of width 4096 — stays linear).
//
// Where this errs: when the sequence is no longer than a head dimension,
// scores are no larger than the output and count as linear (a projection
// from such a short run to a long one is low); an attention function that
// returns its scores (no output after them) keeps them linear too.
func seqSquared(h *history.History, seq int64) []bool {
	sq := make([]bool, len(h.Blocks))
	ev := h.Device.Events
	var call []int32 // the blocks of the current attention call, in order
	fits := func(r int64) bool { return seq <= 0 || seq*seq > 0 && r%(seq*seq) == 0 }
	closeCall := func() {
		if len(call) == 0 {
			return
		}
		out := h.Blocks[call[len(call)-1]].Requested
		for _, bi := range call {
			b := &h.Blocks[bi]
			if b.Requested > out && fits(b.Requested) {
				sq[bi] = true
			}
		}
		call = call[:0]
	}
	for i := range ev {
		if ev[i].Action != snapshot.ActionAlloc {
			continue
		}
		bi := h.OpenAt(i)
		if bi < 0 {
			continue
		}
		b := &h.Blocks[bi]
		m := h.Markers.Get(b.Stack)
		if !m.Quadratic() {
			closeCall()
			continue
		}
		if maskCode(h, b.Stack) {
			sq[bi] = fits(b.Requested)
			continue
		}
		call = append(call, bi)
	}
	closeCall()

	// Sizes of forward tensors: seq² (attention's) and per-token (the rest).
	quad, lin := map[int64]bool{}, map[int64]bool{}
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.Alloc < 0 || !activationLike(b.Category) || h.Markers.Get(b.Stack).Hint < history.HintUser {
			continue
		}
		if sq[bi] {
			quad[b.Requested] = true
		} else {
			lin[b.Requested] = true
		}
	}
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.Alloc < 0 || sq[bi] || !activationLike(b.Category) || h.Markers.Get(b.Stack).Hint >= history.HintUser {
			continue
		}
		if h.Phases.Code[b.Alloc] == history.CodeBackward && quad[b.Requested] && !lin[b.Requested] {
			sq[bi] = true
		}
	}
	return sq
}

// SeqSquared marks the blocks of h the what-if scales with the square of
// the sequence (seqSquared, the sequence length unknown): what a
// suggestion about attention's seq² memory must count to agree with it.
func SeqSquared(h *history.History) []bool { return seqSquared(h, 0) }

// activationLike reports whether a category is memory of a step's
// computation (what the batch and the sequence scale).
func activationLike(c result.Category) bool {
	return c == result.Activation || c == result.Temporary || c == result.AutogradDetail
}

// maskCode reports whether the innermost Python frame of a stack is a
// function named for a mask (an attention mask is query × key).
func maskCode(h *history.History, st snapshot.StackID) bool {
	s := h.Snap
	for _, id := range s.StackOf(st) {
		f := &s.Frames[id]
		if !history.IsPython(f) {
			continue
		}
		return strings.Contains(strings.ToLower(f.Name), "mask")
	}
	return false
}
