package whatif

import (
	"math"
	"slices"
	"sort"

	"github.com/torchmem/torchmem/internal/beside"
)

// replay answers the pending queries in one pass over the events. On a
// long run the pass is two: the events after a state that ends no run
// near the middle are replayed on the other core, from that state's parts
// summed from the blocks live there, and their answers merged with the
// first half's as one pass would have found them (the first half's on a
// tie: its states come first). The first half checks that it ends in
// that state; if not, it replays the second half itself.
func (c *curves) replay() {
	c.replays++
	q := c.pending
	c.pending.peaks, c.pending.sums, c.pending.limits, c.pending.states = nil, nil, nil, nil
	sort.Ints(q.states)
	a := c.newReplayScan(&q)
	a.v = c.stateAt(0) // the blocks allocated before the first event
	a.inRun = true     // the state before the first event starts the first run
	a.capture(0)
	if mid := c.replaySplit(); mid > 0 {
		c.split++
		b := c.newReplayScan(&q)
		b.v = c.stateAt(mid)
		b.next = sort.SearchInts(q.states, mid+1) // state mid is the first half's
		wait := beside.Go(func() { b.scan(mid, c.n) })
		a.scan(0, mid)
		wait()
		if a.inRun || a.v != b.v0 {
			a.scan(mid, c.n) // not the state the second half started from
		} else {
			a.merge(b)
			c.merged++
		}
	} else {
		a.scan(0, c.n)
	}
	if a.inRun {
		a.visit(c.n)
	}
	for _, s := range a.captured {
		c.states[s.j] = s.v
	}
	c.states[c.n] = a.v
	for k, f := range q.peaks {
		c.peaks[f] = a.peaks[k]
		if !slices.Contains(f[:], 0) {
			c.states[a.peaks[k].at] = a.atPeak[k]
		}
	}
	for k, s := range q.sums {
		c.sums[s] = a.sums[k]
	}
	for k, lq := range q.limits {
		c.limits[lq] = a.limits[k]
	}
}

// replaySplitEvents is the fewest events replay splits between two
// cores: below, the second core's start costs more than it saves.
var replaySplitEvents = 1 << 18

// replaySplit is the state the second half of a replay starts from: the
// first after the middle whose event only frees (so that it ends no run:
// the first half's last state is outside one), 0 for a replay in one
// pass.
func (c *curves) replaySplit() int {
	if c.n < replaySplitEvents || c.n < 2 {
		return 0
	}
	var d replayDelta
	for i := c.n / 2; i < c.n && i < c.n/2+replaySplitSearch; i++ {
		c.delta(i, &d)
		if d.m > 0 && !d.inc() {
			return i + 1
		}
	}
	return 0
}

// replaySplitSearch is how many events after the middle replaySplit
// looks at for one that only frees.
const replaySplitSearch = 1 << 12

// stateAt is the parts of state j summed from the blocks allocated there.
func (c *curves) stateAt(j int) [numParts]int64 {
	var v [numParts]int64
	for bi := range c.h.Blocks {
		if c.h.Blocks[bi].LiveAt(j - 1) {
			p, n, rest := c.shares(int32(bi))
			v[p] += n
			v[PartFixed] += rest
		}
	}
	return v
}

// replayDelta is what one event changes: m parts by dv.
type replayDelta struct {
	dp [4]Part
	dv [4]int64
	m  int
}

// inc and dec report whether the event adds to a part, takes from one.
func (d *replayDelta) inc() bool {
	for k := range d.m {
		if d.dv[k] > 0 {
			return true
		}
	}
	return false
}

func (d *replayDelta) dec() bool {
	for k := range d.m {
		if d.dv[k] < 0 {
			return true
		}
	}
	return false
}

// delta is what event i changes: the block it allocates, the one it ends.
func (c *curves) delta(i int, d *replayDelta) {
	d.m = 0
	add := func(bi int32, sign int64) {
		p, n, rest := c.shares(bi)
		d.dp[d.m], d.dv[d.m] = p, sign*n
		d.m++
		if rest != 0 {
			d.dp[d.m], d.dv[d.m] = PartFixed, sign*rest
			d.m++
		}
	}
	if bi := c.h.OpenAt(i); bi >= 0 {
		add(bi, 1)
	}
	if bi := c.h.EndAt(i); bi >= 0 {
		add(bi, -1)
	}
}

// replayScan is a replay's pass over a range of events: the state, the
// run it is in, and the answers found so far.
type replayScan struct {
	c     *curves
	q     *queries
	v, v0 [numParts]int64 // the state, and the one the pass started from
	// grew[p]: the state where part p took its value in the current run.
	grew  [numParts]int
	inRun bool
	// A state that holds, part by part, at most what a state visited
	// before it holds beats no peak nor sum: none of their weights is
	// negative (a factor that is, or is not a number, turns this off), and
	// rounding keeps the order of products and of sums taken in the same
	// order. Such states are most of a training run's (a step's
	// activations freed while its gradients are made end runs below the
	// runs before them). ref is the last visited state that was not below
	// another.
	ref      [numParts]int64
	hasRef   bool
	weighsUp bool
	nonzero  [][]Part // the parts each peak's factors weigh, in order
	peaks    []peakAt
	atPeak   [][numParts]int64 // the state at each peak (see replay)
	sums     []peakSum
	limits   []float64
	next     int // the first of q.states not yet passed
	captured []capturedState
}

// capturedState is a state asked for, kept by a pass.
type capturedState struct {
	j int
	v [numParts]int64
}

// newReplayScan is a pass answering q from nothing seen yet.
func (c *curves) newReplayScan(q *queries) *replayScan {
	s := &replayScan{c: c, q: q, weighsUp: true,
		peaks: make([]peakAt, len(q.peaks)), atPeak: make([][numParts]int64, len(q.peaks)),
		sums: make([]peakSum, len(q.sums)), limits: make([]float64, len(q.limits)),
		nonzero: make([][]Part, len(q.peaks))}
	for k := range s.peaks {
		s.peaks[k].bytes = math.Inf(-1)
	}
	for k := range s.sums {
		s.sums[k].bytes = math.MinInt64
	}
	for k := range s.limits {
		s.limits[k] = math.Inf(1)
	}
	for k, f := range q.peaks {
		for p, x := range f {
			s.weighsUp = s.weighsUp && x >= 0
			// The others add a zero, which leaves a sum as it is.
			if x != 0 {
				s.nonzero[k] = append(s.nonzero[k], Part(p))
			}
		}
	}
	return s
}

// capture keeps state j if it is asked for.
func (s *replayScan) capture(j int) {
	states := s.q.states
	for s.next < len(states) && states[s.next] <= j {
		if states[s.next] == j {
			s.captured = append(s.captured, capturedState{j, s.v})
		}
		s.next++
	}
}

// scan replays events from..to−1 from the pass's state.
func (s *replayScan) scan(from, to int) {
	s.v0 = s.v
	var d replayDelta
	for i := from; i < to; i++ {
		s.c.delta(i, &d)
		if d.m == 0 {
			s.capture(i + 1)
			continue
		}
		inc, dec := d.inc(), d.dec()
		if dec && s.inRun {
			s.visit(i) // state i ends a run
			s.inRun = false
		}
		for k := range d.m {
			s.v[d.dp[k]] += d.dv[k]
		}
		if inc {
			if !s.inRun {
				s.inRun = true
				for p := range s.grew {
					s.grew[p] = i
				}
			}
			for k := range d.m {
				if d.dv[k] > 0 {
					s.grew[d.dp[k]] = i + 1
				}
			}
		}
		s.capture(i + 1)
	}
}

// visit weighs state j, the end of a run.
func (s *replayScan) visit(j int) {
	below := s.weighsUp && s.hasRef
	for p := range s.v {
		below = below && s.v[p] <= s.ref[p]
	}
	if !below {
		s.ref, s.hasRef = s.v, true
		s.peaksAndSums()
	}
	for k, lq := range s.q.limits {
		if s.limits[k] >= 0 {
			if f := factorAt(&s.v, lq.limit, lq.seq); f < 0 {
				s.limits[k] = 0
			} else {
				s.limits[k] = min(s.limits[k], f)
			}
		}
	}
}

// peaksAndSums weighs the state for every projected peak and sum.
func (s *replayScan) peaksAndSums() {
	v := &s.v
	var vf [numParts]float64
	for p, x := range v {
		vf[p] = float64(x)
	}
	for k := range s.q.peaks {
		f := &s.q.peaks[k]
		var t float64
		for _, p := range s.nonzero[k] {
			t += f[p] * vf[p]
		}
		if t > s.peaks[k].bytes {
			first := 0
			for p := range f {
				if f[p] != 0 {
					first = max(first, s.grew[p])
				}
			}
			s.peaks[k] = peakAt{t, first}
			s.atPeak[k] = *v
		}
	}
	for k, set := range s.q.sums {
		var t int64
		var parts [numParts]int64
		first := 0
		for p := range v {
			if set&(1<<p) != 0 {
				t += v[p]
				parts[p] = v[p]
				first = max(first, s.grew[p])
			}
		}
		if t > s.sums[k].bytes {
			s.sums[k] = peakSum{t, first, parts}
		}
	}
}

// merge takes in the answers of pass b, which replayed the events after
// s's from the state s ended in, and b's state: the answers of one pass
// over both ranges (s's on a tie, as its states come first).
func (s *replayScan) merge(b *replayScan) {
	for k := range s.peaks {
		if b.peaks[k].bytes > s.peaks[k].bytes {
			s.peaks[k], s.atPeak[k] = b.peaks[k], b.atPeak[k]
		}
	}
	for k := range s.sums {
		if b.sums[k].bytes > s.sums[k].bytes {
			s.sums[k] = b.sums[k]
		}
	}
	for k := range s.limits {
		// Each pass's limit is the least of its states' (0 for one where
		// nothing fits), or NaN from the first NaN on, as one pass's.
		s.limits[k] = min(s.limits[k], b.limits[k])
	}
	s.captured = append(s.captured, b.captured...)
	s.v, s.grew, s.inRun, s.ref, s.hasRef = b.v, b.grew, b.inRun, b.ref, b.hasRef
}
