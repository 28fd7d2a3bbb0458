package history

import (
	"fmt"

	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// loopVisit is one allocation as the loop search sees it at one frame of
// its loop chain.
type loopVisit struct {
	i     int   // event index
	pos   int32 // the frame's position
	pl    int32 // its (position, line) pair
	line  int64
	depth int
	// own: every frame above this one is the previous allocation's, so a
	// return of this frame's line to an earlier one is a loop in this frame
	// (or a call repeated on one line of its caller), not the frame being
	// called anew by a loop further out.
	own   bool
	model bool // the chain goes on into the model below this frame
	chain *loopChain
}

// walkLoopChains calls fn for every frame of the loop chain of every
// allocation from event from on (an allocation with the stack of the one
// before changes no line and is skipped).
func walkLoopChains(h *History, lp *loopPositions, from int, fn func(v loopVisit)) {
	ev := h.Device.Events
	prev := snapshot.StackID(0)
	var last *loopChain
	for i := from; i < len(ev); i++ {
		e := &ev[i]
		if e.Action != snapshot.ActionAlloc || e.Stack == 0 || e.Stack == prev {
			continue
		}
		prev = e.Stack
		c := lp.chain(e.Stack)
		if c == nil {
			continue
		}
		div := 0 // the first frame that differs from the previous chain's
		for last != nil && div < len(c.pos) && div < len(last.pos) && c.pos[div] == last.pos[div] && c.lines[div] == last.lines[div] {
			div++
		}
		for d, pos := range c.pos {
			fn(loopVisit{i: i, pos: pos, pl: c.pl[d], line: c.lines[d], depth: d, own: d <= div, model: c.model, chain: c})
		}
		last = c
	}
}

// loopCand is a loop the lines of one position show: the first line of
// its body (the line its frame returns to) and the last line it returns
// from.
type loopCand struct {
	pos       int32
	head, end int64
}

// loopTrack follows the lines of one position through the allocations,
// cutting the iterations of one candidate loop.
type loopTrack struct {
	loopCand
	started  bool
	prevLine int64
	segStart int   // event index where the current iteration began
	segModel bool  // the current iteration called the model
	segMax   int64 // the highest line of the current iteration
	bounds   []int
	models   int   // iterations (closed ones) that called the model
	maxLine  int64 // the loop body's last line (of the closed iterations)
}

// step advances the track by a visit whose frame calls the model when
// model is set. A return of the frame's own line from the loop body (or
// after it) to the loop's head starts an iteration when the current
// iteration already allocated at that line; a return to a line before the
// head that an earlier iteration allocated at (an outer loop's code) starts
// one as well. A return from a line
// before the head is another loop's, before this one.
func (t *loopTrack) step(v loopVisit, model bool, seen []int32) {
	l := v.line
	if t.started && v.own && l < t.prevLine && l <= t.head && t.prevLine >= t.head {
		if last := seen[v.pl]; last >= 0 && (l < t.head || int(last) >= t.segStart) {
			t.bounds = append(t.bounds, v.i)
			if t.segModel {
				t.models++
			}
			t.maxLine = max(t.maxLine, t.segMax)
			t.segStart, t.segModel, t.segMax = v.i, false, l
		}
	}
	if !t.started {
		t.started, t.segStart, t.segMax = true, v.i, l
	}
	t.segMax = max(t.segMax, l)
	t.prevLine = l
	t.segModel = t.segModel || model
	seen[v.pl] = int32(v.i)
}

// iterations is the number of iterations the track saw, and how many
// called the model.
func (t *loopTrack) iterations() (n, model int) {
	n = len(t.bounds) + 1
	model = t.models
	if t.segModel {
		model++
	}
	return n, model
}

// loopSteps finds the loop that runs the model among the events from event
// first on (0: all of them) and cuts the events at the
// start of each of its iterations. A first walk finds the loops: for every
// position, the lines its own line returns to (a frame called anew by a
// loop further out returns too, but that is the outer frame's loop); a line
// returned to more than once (or the one return of a position) is the head
// of a candidate loop — a position may hold several, nested (an epoch loop
// around a batch loop) or one after the other (a warm-up loop, then the
// evaluation). A second walk cuts each candidate's iterations. Among the
// candidates whose iterations call the model, the one with the most
// iterations wins (the outermost among equals): the loop that runs the
// model once per iteration.
//
// Calling the model is entering an nn.Module call or a model forward below
// the loop's frame. When no stack of the device shows one (a model written
// as plain functions), it is calling a function that itself holds a loop
// (the model's layer loop, inside the function the step loop calls). When
// loops show but none does either — one loop and nothing to say it is
// outside the model, as in one pass of a function model over its layers —
// nothing tells steps from layers: the result has no steps, its evidence
// says why, and no other source may cut steps (ambiguous).
func loopSteps(h *History, first int) (found planFound, ambiguous bool) {
	lp := newLoopPositions(h.Snap)
	var prevLine []int64
	var started []bool
	var returns []int32
	var from []int64 // (position, line) → the highest line a return to it came from
	var seen []int32
	modelFrames := false
	walkLoopChains(h, lp, first, func(v loopVisit) {
		for int(v.pos) >= len(prevLine) {
			prevLine, started = append(prevLine, 0), append(started, false)
		}
		for int(v.pl) >= len(seen) {
			seen, returns, from = append(seen, -1), append(returns, 0), append(from, 0)
		}
		if v.own && seen[v.pl] >= 0 && started[v.pos] && v.line < prevLine[v.pos] {
			returns[v.pl]++
			from[v.pl] = max(from[v.pl], prevLine[v.pos])
		}
		started[v.pos], prevLine[v.pos] = true, v.line
		seen[v.pl] = int32(v.i)
		modelFrames = modelFrames || v.model
	})
	total := map[int32]int{}
	for pl, n := range returns {
		total[lp.plKey[pl].pos] += int(n)
	}
	var cands []loopCand
	isLoop := make([]bool, len(prevLine))
	for pl, n := range returns {
		if k := lp.plKey[pl]; n >= 2 || n == 1 && total[k.pos] == 1 {
			cands = append(cands, loopCand{pos: k.pos, head: k.line, end: from[pl]})
			isLoop[k.pos] = true
		}
	}
	cands = dropOverlaps(cands)
	if len(cands) == 0 {
		return planFound{}, false
	}
	tracks := make([]*loopTrack, len(cands))
	byPos := map[int32][]*loopTrack{}
	for k, c := range cands {
		tracks[k] = &loopTrack{loopCand: c}
		byPos[c.pos] = append(byPos[c.pos], tracks[k])
	}
	for k := range seen {
		seen[k] = -1
	}
	walkLoopChains(h, lp, first, func(v loopVisit) {
		ts := byPos[v.pos]
		if len(ts) == 0 {
			return
		}
		model := v.model || !modelFrames && v.chain.loopBelow(v.depth, isLoop)
		last := seen[v.pl]
		for _, t := range ts {
			seen[v.pl] = last // every track sees the line's last use before this visit
			t.step(v, model, seen)
		}
	})
	var best *loopTrack
	bestN := 1
	for _, t := range tracks {
		if len(t.bounds) == 0 {
			continue
		}
		n, model := t.iterations()
		if float64(model) < loopModelShareMin*float64(n) {
			continue
		}
		if best == nil || n > bestN || n == bestN && outerLoop(lp, t.loopCand, best.loopCand) {
			best, bestN = t, n
		}
	}
	if best == nil {
		if modelFrames {
			return planFound{}, false
		}
		out := cands[0]
		for _, c := range cands[1:] {
			if outerLoop(lp, c, out) {
				out = c
			}
		}
		return planFound{source: result.StepsNone, evidence: fmt.Sprintf("the loop at %s may be the model's own layer loop: "+
			"no nn.Module or forward frames, and no loop around it", loopSite(lp.fnOf[out.pos], out.head))}, true
	}
	return loopPlan(h, lp, best.pos, best), false
}

// outerLoop reports whether loop a lies outside loop b: at a shallower
// frame, or in the same frame at an earlier line (an outer loop's body
// starts first), the first position among equals.
func outerLoop(lp *loopPositions, a, b loopCand) bool {
	if da, db := lp.depth[a.pos], lp.depth[b.pos]; da != db {
		return da < db
	}
	if a.pos != b.pos {
		return a.pos < b.pos
	}
	return a.head < b.head
}

// loopBelow reports whether a frame of the chain deeper than depth is at a
// position that holds a loop.
func (c *loopChain) loopBelow(depth int, isLoop []bool) bool {
	for d := depth + 1; d < len(c.pos); d++ {
		if int(c.pos[d]) < len(isLoop) && isLoop[c.pos[d]] {
			return true
		}
	}
	return false
}

// dropOverlaps drops the candidates that overlap another of their position
// without lying inside it: a line the loop body returns to within an
// iteration (a statement over several lines, a call allocating again after
// the next line) is no loop of its own. Loops of one position nest (an
// epoch loop around a batch loop) or follow each other (a warm-up loop,
// then the evaluation).
func dropOverlaps(cands []loopCand) []loopCand {
	out := cands[:0:0]
	for _, c := range cands {
		overlaps := false
		for _, o := range cands {
			if o.pos == c.pos && o.head < c.head && c.head <= o.end && o.end < c.end {
				overlaps = true
				break
			}
		}
		if !overlaps {
			out = append(out, c)
		}
	}
	return out
}
