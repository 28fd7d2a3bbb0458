package history

import (
	"fmt"

	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// The loop that runs the model, found in the Python stacks: a frame outside
// the model (above every nn.Module call and every model forward) whose line
// returns to the start of its loop body at each iteration, each iteration
// calling the model. A layer loop sits inside the model's forward and is
// never seen here; a loop over parameters (an optimizer, Module.to) calls
// no model; one pass of a script returns to no earlier line.

// Bounds of the loop search.
const (
	maxLoopDepth      = 64   // frames followed from the outermost in
	loopModelShareMin = 0.75 // share of iterations that must call the model
)

// loopChain is what the loop search needs of one stack: its Python frames
// from the outermost in, down to the first model frame (excluded), and
// whether the stack goes on into the model.
type loopChain struct {
	pos   []int32 // position of each frame (its callers and its function)
	lines []int64
	pl    []int32 // the (position, line) pair of each frame, interned
	model bool
}

// loopPositions interns positions: a function called from the same
// callers at the same lines is the same position.
type loopPositions struct {
	s      *snapshot.Snapshot
	ids    map[[2]int64]int32 // (parent prefix, function or frame) → id
	funcs  map[FuncKey]int32
	fnOf   []FuncKey // position → function
	depth  []int32   // position → depth
	chains map[snapshot.StackID]*loopChain
	// pls interns (position, line) pairs: the walks index slices by them.
	pls   map[loopSeen]int32
	plKey []loopSeen
}

func newLoopPositions(s *snapshot.Snapshot) *loopPositions {
	return &loopPositions{s: s, ids: map[[2]int64]int32{}, funcs: map[FuncKey]int32{}, chains: map[snapshot.StackID]*loopChain{}, pls: map[loopSeen]int32{}}
}

func (lp *loopPositions) intern(parent int64, child int64) int32 {
	k := [2]int64{parent, child}
	if id, ok := lp.ids[k]; ok {
		return id
	}
	id := int32(len(lp.ids))
	lp.ids[k] = id
	return id
}

// chain returns the loop chain of a stack (nil without Python frames).
func (lp *loopPositions) chain(st snapshot.StackID) *loopChain {
	if c, ok := lp.chains[st]; ok {
		return c
	}
	frames := lp.s.StackOf(st)
	c := &loopChain{}
	prefix := int64(-1) // the callers so far
	for i := len(frames) - 1; i >= 0 && len(c.pos) < maxLoopDepth; i-- {
		f := &lp.s.Frames[frames[i]]
		if IsModelFrame(f) {
			c.model = true
			break
		}
		if !IsPython(f) || IsNoise(f) {
			continue
		}
		fk := FuncKey{f.Filename, f.Name}
		fid, ok := lp.funcs[fk]
		if !ok {
			fid = int32(len(lp.funcs))
			lp.funcs[fk] = fid
		}
		// positions and prefixes share one table: a position is (prefix,
		// −1−function), a prefix is (prefix, frame).
		pos := lp.intern(prefix, -1-int64(fid))
		if int(pos) >= len(lp.fnOf) {
			lp.fnOf = append(lp.fnOf, make([]FuncKey, int(pos)+1-len(lp.fnOf))...)
			lp.depth = append(lp.depth, make([]int32, int(pos)+1-len(lp.depth))...)
		}
		lp.fnOf[pos], lp.depth[pos] = fk, int32(len(c.pos))
		c.pos = append(c.pos, pos)
		c.lines = append(c.lines, f.Line)
		k := loopSeen{pos, f.Line}
		pl, ok := lp.pls[k]
		if !ok {
			pl = int32(len(lp.plKey))
			lp.pls[k] = pl
			lp.plKey = append(lp.plKey, k)
		}
		c.pl = append(c.pl, pl)
		prefix = int64(lp.intern(prefix, int64(frames[i])))
	}
	if len(c.pos) == 0 {
		c = nil
	}
	lp.chains[st] = c
	return c
}

// loopPlan turns the boundaries of the loop at position pos into steps:
// the first iteration starts at the first allocation of the loop body
// before the first boundary (allocations at lines before the loop's head
// are set-up; the first iteration may allocate at lines the others do
// not), the last ends before the first allocation after it that is not in
// the loop body (a line outside the lines of the other iterations, or
// code outside the loop's frame).
func loopPlan(h *History, lp *loopPositions, pos int32, t *loopTrack) planFound {
	ev := h.Device.Events
	head, maxLine := t.head, t.maxLine
	first := t.bounds[0]
	// the start of the first iteration: walk back over the allocations of
	// this position (others — the loop's caller moving the batch, frames
	// without Python — lie between) down to a line before the loop's head
	start := first
	for i := first - 1; i >= 0; i-- {
		e := &ev[i]
		if e.Action != snapshot.ActionAlloc || e.Stack == 0 {
			continue
		}
		l, ok := lp.chain(e.Stack).lineAt(pos)
		if !ok {
			continue
		}
		if l < head {
			break // a line before the loop body: set-up
		}
		start = i
	}
	// the end of the last iteration
	last := t.bounds[len(t.bounds)-1]
	end := len(ev) - 1
	for i := last + 1; i < len(ev); i++ {
		e := &ev[i]
		if e.Action != snapshot.ActionAlloc || e.Stack == 0 {
			continue
		}
		c := lp.chain(e.Stack)
		if c == nil {
			continue
		}
		if l, ok := c.lineAt(pos); !ok || l < head || l > maxLine {
			end = i - 1
			break
		}
	}
	bounds := t.bounds
	if start < first {
		bounds = append([]int{start}, t.bounds...)
	}
	f := planFound{source: result.StepsFromLoop, site: loopSite(lp.fnOf[pos], head), Loop: lp.fnOf[pos]}
	f.evidence = fmt.Sprintf("the loop at %s", f.site)
	for k, b := range bounds {
		e := end
		if k+1 < len(bounds) {
			e = bounds[k+1] - 1
		}
		f.steps = append(f.steps, StepRange{N: k + 1, Start: b, End: e})
	}
	return f
}

// lineAt returns the line of the chain's frame at position pos.
func (c *loopChain) lineAt(pos int32) (int64, bool) {
	if c == nil {
		return 0, false
	}
	for d, p := range c.pos {
		if p == pos {
			return c.lines[d], true
		}
	}
	return 0, false
}

// loopSeen is a line of a position.
type loopSeen struct {
	pos  int32
	line int64
}
