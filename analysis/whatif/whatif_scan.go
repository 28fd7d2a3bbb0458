package whatif

import (
	"math"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/result"
)

// curves answers what the what-if asks of the parts of one device's
// allocated memory over its run — a projected peak, the largest a part
// was, how far the batch could grow — by replaying the blocks event by
// event (History.OpenAt and EndAt), keeping nothing per event: the part
// of each block, and the answers.
//
// Only the ends of runs of events that add memory are looked at (and the
// state before the first event): any other state holds, part by part, at
// most what the state before it holds, so no maximum of a sum with
// non-negative weights, and no minimum of what still fits, is first
// reached there. Within a run, the first state that reaches the run's
// value of such a sum is the one after the last growth of a part the sum
// weighs, so projected peaks keep the index of the first event that
// reaches them.
//
// Queries (peak, maxOf, argmax, partsAtMax, maxFactor, at) answer at once
// with a replay of their own; inside resolve they are gathered, answered
// together by one replay, and the function asked again until every answer
// is known. A replay also keeps the state after the last event and the
// state at each peak of factors that weigh every part, so that the
// what-if needs one replay.
type curves struct {
	h    *history.History
	part []Part // the part of each block
	n    int    // events: states 0 (before the first) … n (after the last)
	// largestGrad is the largest block of the parameters' own gradients
	// (PartGrad, PartStaleGrad), 0 when there is none.
	largestGrad int64

	peaks     map[factors]peakAt
	sums      map[partSet]peakSum
	limits    map[factorQuery]float64
	states    map[int][numParts]int64
	gathering bool // inside resolve: gather queries instead of replaying
	replays   int  // replays done (a test counts them)
	split     int  // replays begun in two passes (a test counts them)
	merged    int  // of those, the ones whose passes were merged
	pending   queries
}

// queries are the questions a replay answers.
type queries struct {
	peaks  []factors
	sums   []partSet
	limits []factorQuery
	states []int // states asked for, their parts kept
}

// peakAt is a projected peak and the state that first reaches it.
type peakAt struct {
	bytes float64
	at    int
}

// partSet is a set of parts, one bit each.
type partSet uint32

// peakSum is the largest sum of a set of parts, the first state that
// holds it and the bytes of those parts there (the others are 0).
type peakSum struct {
	bytes int64
	at    int
	parts [numParts]int64
}

// factorQuery is a maxFactor question.
type factorQuery struct {
	limit int64
	seq   bool
}

// buildCurves decides the part of every block of h; seq is the sequence
// length of the run when known (0 otherwise), which sharpens which tensors
// are seq² (seqSquared). A block of a part that scales counts the bytes
// its tensor requested there; the allocator's rounding on top (under
// 1 MiB a block) does not grow with the tensor and is fixed memory
// (curves.shares).
func buildCurves(h *history.History, seq int64) *curves {
	return buildCurvesWith(h, seqSquared(h, seq))
}

// buildCurvesWith is buildCurves with the blocks' seq² marks made
// (seqSquared).
func buildCurvesWith(h *history.History, sq []bool) *curves {
	c := &curves{h: h, part: make([]Part, len(h.Blocks)), n: len(h.Device.Events),
		peaks: map[factors]peakAt{}, sums: map[partSet]peakSum{}, limits: map[factorQuery]float64{}, states: map[int][numParts]int64{}}
	stale := staleGradients(h)
	for bi := range h.Blocks {
		p := PartOf(h, &h.Blocks[bi], stale[bi], sq[bi])
		c.part[bi] = p
		if p == PartGrad || p == PartStaleGrad {
			c.largestGrad = max(c.largestGrad, h.Blocks[bi].Size)
		}
	}
	return c
}

// largestGradient is the most one of the parameters' own gradients (DDP's
// buckets aside) can take when it is made again: its block, and above
// 1 MiB the remainder under 1 MiB that the caching allocator leaves unsplit
// when it serves a large request from a larger free block. 0 when there is
// none.
func (c *curves) largestGradient() int64 {
	if c.largestGrad > 1<<20 {
		return c.largestGrad + 1<<20
	}
	return c.largestGrad
}

// shares is how block bi's bytes divide: n in its part p, the rest fixed.
func (c *curves) shares(bi int32) (p Part, n, rest int64) {
	b := &c.h.Blocks[bi]
	p = c.part[bi]
	if scales(p) && b.Requested > 0 && b.Requested < b.Size {
		return p, b.Requested, b.Size - b.Requested
	}
	return p, b.Size, 0
}

// resolve runs ask until every query it makes is answered: each time some
// are not, one replay answers them all and ask runs again (the answers of
// a run that left some unanswered are zero and must be discarded by ask).
func (c *curves) resolve(ask func()) {
	c.gathering = true
	defer func() { c.gathering = false }()
	for {
		ask()
		if c.missing() == 0 {
			return
		}
		c.replay()
	}
}

// missing is the number of queries waiting for a replay.
func (c *curves) missing() int {
	q := &c.pending
	return len(q.peaks) + len(q.sums) + len(q.limits) + len(q.states)
}

// ask answers at once outside resolve, and records the query inside.
func (c *curves) ask(known bool, record func()) {
	if known {
		return
	}
	record()
	if !c.gathering {
		c.replay()
	}
}

// peak is the projected peak under f and the state (0: before the first
// event, j: after event j−1) that first reaches it.
func (c *curves) peak(f factors) (int64, int) {
	_, ok := c.peaks[f]
	c.ask(ok, func() { c.pending.peaks = append(c.pending.peaks, f) })
	r, ok := c.peaks[f]
	if !ok {
		return 0, 0
	}
	return saturate(r.bytes), r.at
}

// setOf is the set of the given parts.
func setOf(parts []Part) partSet {
	var s partSet
	for _, p := range parts {
		s |= 1 << p
	}
	return s
}

// sum is the largest sum of some parts together over the run and the
// first state that holds it.
func (c *curves) sum(parts []Part) peakSum {
	s := setOf(parts)
	_, ok := c.sums[s]
	c.ask(ok, func() { c.pending.sums = append(c.pending.sums, s) })
	return c.sums[s] // zero while gathered
}

// partsAtMax is the bytes of some parts (the others 0) at the first state
// where they are largest together, and that sum (see sum).
func (c *curves) partsAtMax(parts ...Part) ([numParts]int64, int64) {
	r := c.sum(parts)
	return r.parts, r.bytes
}

// maxOf is the largest value of some parts together over the run (0 when
// they never hold any).
func (c *curves) maxOf(parts ...Part) int64 { return max(c.sum(parts).bytes, 0) }

// argmax is the first state where some parts together are largest (0 when
// they never hold any).
func (c *curves) argmax(parts ...Part) int {
	if r := c.sum(parts); r.bytes >= 0 {
		return r.at
	}
	return 0
}

// at is the bytes of each part at state j (0: before the first event, n:
// after the last).
func (c *curves) at(j int) [numParts]int64 {
	j = min(max(j, 0), c.n)
	_, ok := c.states[j]
	c.ask(ok, func() { c.pending.states = append(c.pending.states, j) })
	return c.states[j]
}

// end is the state after the last event.
func (c *curves) end() int { return c.n }

// value is the projected bytes of state j under f.
func (c *curves) value(j int, f factors) float64 {
	v := c.at(j)
	return dot(f, &v)
}

// dot is the projected bytes of a state under f.
func dot(f factors, v *[numParts]int64) float64 {
	var t float64
	for p := range v {
		t += f[p] * float64(v[p])
	}
	return t
}

// maxFactor is the largest k such that the curve with the step's parts
// scaled by k (batch: linear, KV cache and attention parts ×k; sequence:
// linear and KV cache ×k, attention ×k²) stays within limit; +Inf when the
// step's parts are empty, 0 when even k→0 does not fit.
func (c *curves) maxFactor(limit int64, seq bool) float64 {
	q := factorQuery{limit, seq}
	_, ok := c.limits[q]
	c.ask(ok, func() { c.pending.limits = append(c.pending.limits, q) })
	return c.limits[q]
}

// factorAt is how far the step's parts of state v can be scaled within
// limit (see maxFactor): +Inf when they are empty, −1 when nothing fits.
func factorAt(v *[numParts]int64, limit int64, seq bool) float64 {
	fixed := float64(0)
	for p := range v {
		if !scales(Part(p)) {
			fixed += float64(v[p])
		}
	}
	lin, quad := float64(v[PartLinear]+v[PartLinearRest]+v[PartKV]), float64(v[PartQuad]+v[PartQuadRest])
	room := float64(limit) - fixed
	if room < 0 {
		return -1
	}
	switch {
	case !seq && lin+quad > 0:
		return room / (lin + quad)
	case seq && quad > 0:
		return (-lin + math.Sqrt(lin*lin+4*quad*room)) / (2 * quad)
	case seq && lin > 0:
		return room / lin
	}
	return math.Inf(1)
}

// saturate converts projected bytes to int64, at most math.MaxInt64 (a
// projection thousands of times its run can exceed it).
func saturate(x float64) int64 {
	if x >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(math.Round(x))
}

// phaseAt is the phase of state j (the event that led to it).
func (c *curves) phaseAt(j int) result.Phase {
	if j == 0 {
		return result.PhaseBeforeRecording
	}
	return c.h.Phases.At(j - 1)
}
