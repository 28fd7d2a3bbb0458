package leaks

import (
	"sort"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/result"
)

// This file compares the steps of a leak scan: which blocks of a step outlive
// the next one, what they hold at the end, and where and in which phase they
// were allocated.

// scanSurvivors finds, for every block allocated in a step, whether it
// outlives the next step, and how it ends.
func scanSurvivors(h *history.History, plan *history.StepPlan, steps []history.StepRange) *leakScan {
	n := len(h.Device.Events)
	sc := &leakScan{h: h, plan: plan, steps: steps, sites: h.NewSiteCache(),
		kept: make([][]int, len(steps)), held: make([][]int, len(steps)), guessed: h.Anonymous > 0}
	if !apart(steps) {
		sc.stepOf = make([]int32, n)
		for i := range sc.stepOf {
			sc.stepOf[i] = -1
		}
		for k, st := range steps {
			for i := st.Start; i <= st.End && i < n; i++ {
				sc.stepOf[i] = int32(k)
			}
		}
	}
	for _, st := range steps {
		for i := st.Start; i <= st.End && i < n && !sc.backward; i++ {
			sc.backward = h.Phases.Code[i] == history.CodeBackward
		}
	}
	S := steps
	lastEnd := S[len(S)-1].End
	// nextStep returns the step holding event i, or the first one after it.
	nextStep := func(i int) int {
		if k := sc.stepAt(i); k >= 0 {
			return k
		}
		return sort.Search(len(S), func(k int) bool { return S[k].Start > i })
	}
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.Alloc < 0 || b.Untracked {
			continue
		}
		k := sc.stepAt(int(b.Alloc))
		if k < 0 {
			continue
		}
		free := int(b.Free)
		if o := h.FirstOOM; o >= 0 && int(b.Alloc) < o && free > o {
			free = -1 // freed while the OutOfMemoryError unwound: it lived to the OOM
		}
		if free < 0 || free > lastEnd {
			sc.held[k] = append(sc.held[k], bi)
		}
		if k+1 >= len(S) {
			continue
		}
		if free >= 0 && free <= S[k+1].End {
			continue // freed by the end of the next step: not a survivor
		}
		if free < 0 || free > lastEnd {
			if k >= 1 && k <= len(S)-2 {
				sc.kept[k] = append(sc.kept[k], bi)
			}
			continue
		}
		sc.delayed = append(sc.delayed, delayedBlock{bi: bi, from: k, upto: nextStep(free)})
	}
	return sc
}

// eligible is the number of steps whose survivors count: all but the first
// and the last.
func (sc *leakScan) eligible() int { return len(sc.steps) - 2 }

// heldAtEnd sums the blocks of every step, the first and the last
// included, that are still held at the end of the last step and were
// allocated at one of sites: what a pattern holds at the end (a list that
// keeps an output per step over 6 steps holds 6 outputs); autocast's weight
// copies count only with copies (a graph keeps those it saved, a list
// does not). It returns the bytes and the step numbers that hold some.
func (sc *leakScan) heldAtEnd(sites map[string]bool, copies bool) (int64, []int) {
	var total int64
	steps := []int{}
	for k, blocks := range sc.held {
		var t int64
		for _, bi := range blocks {
			if sites[sc.site(bi)] && (copies || sc.h.Blocks[bi].Rule() != history.RuleAutocastWeightCache) {
				t += sc.h.Blocks[bi].Size
			}
		}
		if t > 0 {
			total += t
			steps = append(steps, sc.steps[k].N)
		}
	}
	return total, steps
}

// stepNumbers names steps by index.
func (sc *leakScan) stepNumbers(ks []int) []int {
	out := make([]int, len(ks))
	for i, k := range ks {
		out[i] = sc.steps[k].N
	}
	return out
}

// site names a block's allocation site (its first user frame).
func (sc *leakScan) site(bi int) string { return sc.h.BlockSite(sc.sites, &sc.h.Blocks[bi]) }

// forwardish reports whether block bi was allocated in forward (or, in
// steps without any backward, in an unknown phase: an inference or
// evaluation loop whose phases were not recorded).
func (sc *leakScan) forwardish(bi int) bool {
	switch sc.h.Phases.At(int(sc.h.Blocks[bi].Alloc)) {
	case result.PhaseForward:
		return true
	case result.PhaseUnknown:
		return !sc.backward
	}
	return false
}

// siteBytes is the bytes one site leaves per step.
type siteBytes struct {
	site   string
	bytes  int64
	blocks int
}

// bySite groups blocks by site, largest first.
func (sc *leakScan) bySite(blocks []int) []siteBytes {
	m := map[string]*siteBytes{}
	var order []string
	for _, bi := range blocks {
		s := sc.site(bi)
		a := m[s]
		if a == nil {
			a = &siteBytes{site: s}
			m[s] = a
			order = append(order, s)
		}
		a.bytes += sc.h.Blocks[bi].Size
		a.blocks++
	}
	out := make([]siteBytes, 0, len(m))
	for _, s := range order {
		out = append(out, *m[s])
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].bytes != out[b].bytes {
			return out[a].bytes > out[b].bytes
		}
		return out[a].site < out[b].site
	})
	return out
}

func (sc *leakScan) sumBytes(blocks []int) int64 {
	var t int64
	for _, bi := range blocks {
		t += sc.h.Blocks[bi].Size
	}
	return t
}

// forwardAllocated is the bytes allocated in forward during step k.
func (sc *leakScan) forwardAllocated(k int) int64 {
	var t int64
	st := sc.steps[k]
	for i := st.Start; i <= st.End; i++ {
		if bi := sc.h.OpenAt(i); bi >= 0 && sc.forwardish(int(bi)) {
			t += sc.h.Blocks[bi].Size
		}
	}
	return t
}

// graphAlive reports whether the steps ran no backward (so tensors kept
// from them hold their graph too).
func (sc *leakScan) graphAlive(ks []int) bool {
	for _, k := range ks {
		st := sc.steps[k]
		for i := st.Start; i <= st.End; i++ {
			if sc.h.Phases.Code[i] == history.CodeBackward {
				return false
			}
		}
	}
	return true
}

// apart reports whether the steps are in order and none starts before the
// ones before it have ended: then the step holding an event is the last one
// starting at or before it, if it has not ended (stepAt), and no per-event
// index is needed (4 bytes an event, at the analysis's peak).
func apart(steps []history.StepRange) bool {
	for k, st := range steps {
		if st.Start > st.End || k > 0 && st.Start <= steps[k-1].End {
			return false
		}
	}
	return true
}

// stepAt is the index of the step holding event i, −1 outside the steps.
func (sc *leakScan) stepAt(i int) int {
	if sc.stepOf != nil {
		return int(sc.stepOf[i])
	}
	S := sc.steps
	k := sort.Search(len(S), func(k int) bool { return S[k].Start > i }) - 1
	if k < 0 || i > S[k].End {
		return -1
	}
	return k
}
