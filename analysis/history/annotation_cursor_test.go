package history

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/torchmem/torchmem/result"
)

// TestAnnCursorMatchesSearch: the cursor over annotations finds what a
// binary search finds, for times in order (the usual device), times that
// go back (a trace's threads interleaved), repeated times and times before
// and after every annotation.
func TestAnnCursorMatchesSearch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order func(r *rand.Rand, ts []int64)
	}{
		{"in order", func(_ *rand.Rand, ts []int64) { sort.Slice(ts, func(a, b int) bool { return ts[a] < ts[b] }) }},
		{"shuffled", func(r *rand.Rand, ts []int64) { r.Shuffle(len(ts), func(a, b int) { ts[a], ts[b] = ts[b], ts[a] }) }},
		{"in order with steps back", func(r *rand.Rand, ts []int64) {
			sort.Slice(ts, func(a, b int) bool { return ts[a] < ts[b] })
			for k := 0; k < len(ts)/10; k++ {
				i := r.IntN(len(ts))
				ts[i] -= r.Int64N(50)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			ivs := make([]interval, 40)
			for i := range ivs {
				s := r.Int64N(1000)
				ivs[i] = interval{start: s, end: s + r.Int64N(100)}
			}
			byEnd := append([]interval(nil), ivs...)
			byStart := append([]interval(nil), ivs...)
			sort.Slice(byEnd, func(a, b int) bool { return byEnd[a].end < byEnd[b].end })
			sort.Slice(byStart, func(a, b int) bool { return byStart[a].start < byStart[b].start })
			ts := make([]int64, 2000)
			for i := range ts {
				ts[i] = r.Int64N(1300) - 100
			}
			tc.order(r, ts)
			c := annCursor{byEnd: byEnd, byStart: byStart, last: math.MinInt64}
			for i, at := range ts {
				e, s := c.at(at)
				we := sort.Search(len(byEnd), func(x int) bool { return byEnd[x].end >= at })
				ws := sort.Search(len(byStart), func(x int) bool { return byStart[x].start > at })
				if e != we || s != ws {
					t.Fatalf("time %d (#%d): cursor %d, %d; search %d, %d", at, i, e, s, we, ws)
				}
			}
		})
	}
}

// TestSpanCursorMatchesSpanAt: the cursor over phase spans answers what
// SpanAt answers for every event asked in order, with gaps between spans,
// spans without events and events past the last span.
func TestSpanCursorMatchesSpanAt(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 20 {
		n := 500
		p := &Phases{Code: make([]uint8, n)}
		for i := 0; i < n-10; {
			i += r.IntN(4) // a gap (no span) of up to three events
			j := min(i+r.IntN(30), n-10)
			sp := result.PhaseSpan{StartEvent: i, EndEvent: j, Events: j - i + 1}
			if r.IntN(5) == 0 {
				sp.Events = 0 // an annotated phase without events of this device
			}
			p.Spans = append(p.Spans, sp)
			i = j + 1
		}
		p.compact()
		c := spanCursor{p: p}
		for i := -1; i <= n; i++ {
			if got, want := c.at(i), p.SpanAt(i); got != want {
				t.Fatalf("trial %d, event %d: cursor %d, SpanAt %d", trial, i, got, want)
			}
		}
	}
}
