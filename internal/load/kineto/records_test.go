package kineto

import (
	"math/rand"
	"testing"
)

// TestCountersRoundTrip: the totals of [memory] records kept only where
// the device's records before them do not tell them read back exactly, for
// records of several devices interleaved, totals that step by Bytes or not,
// missing totals and totals at the ends of int64; and only the values the
// steps do not tell are kept.
func TestCountersRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	type rec struct {
		dev       int
		n, ta, tr int64
		flags     uint8
	}
	for round := range 50 {
		tr := &traceReader{}
		devs := 1 + round%4
		state := make([]counters, devs)
		lastTA, lastTR := make([]int64, devs), make([]int64, devs)
		var recs []rec
		stepped, same := 0, 0
		for i := range 2000 {
			r := rec{dev: rng.Intn(devs), n: rng.Int63n(1<<20) - 1<<19}
			if rng.Intn(10) > 0 {
				r.flags |= memHasTA
				r.ta = lastTA[r.dev] + r.n // the usual: steps by Bytes
				switch rng.Intn(20) {
				case 0:
					r.ta = rng.Int63() - 1<<62 // lost or reordered events
				case 1:
					r.ta = 1<<63 - 1 - rng.Int63n(4) // near the end of int64
				}
				lastTA[r.dev] = r.ta
			}
			if rng.Intn(10) > 0 {
				r.flags |= memHasTR
				r.tr = lastTR[r.dev]
				if rng.Intn(8) == 0 {
					r.tr = rng.Int63()
				}
				lastTR[r.dev] = r.tr
			}
			r.flags = tr.keepCounters(&state[r.dev], int32(i), r.n, r.ta, r.tr, r.flags)
			if r.flags&memTAStep != 0 {
				stepped++
			}
			if r.flags&memTRSame != 0 {
				same++
			}
			recs = append(recs, r)
		}
		if len(tr.taVals)+stepped != countFlag(recs, memHasTA, func(r rec) uint8 { return r.flags }) ||
			len(tr.trVals)+same != countFlag(recs, memHasTR, func(r rec) uint8 { return r.flags }) {
			t.Fatalf("round %d: %d+%d totals allocated, %d+%d reserved kept", round, len(tr.taVals), stepped, len(tr.trVals), same)
		}
		if stepped < len(recs)/2 {
			t.Fatalf("round %d: %d of %d allocated totals told by the steps", round, stepped, len(recs))
		}
		walk := make([]counters, devs)
		for i, r := range recs {
			ta, trv := tr.readCounters(&walk[r.dev], int32(i), r.n, r.flags)
			if (r.flags&memHasTA != 0 && ta != r.ta) || (r.flags&memHasTR != 0 && trv != r.tr) {
				t.Fatalf("round %d, record %d: read %d, %d; kept %d, %d", round, i, ta, trv, r.ta, r.tr)
			}
		}
	}
}

func countFlag[T any](xs []T, flag uint8, flags func(T) uint8) int {
	n := 0
	for _, x := range xs {
		if flags(x)&flag != 0 {
			n++
		}
	}
	return n
}
