package whatif

import (
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// everyState is the parts of every state computed the plain way, from
// each block's allocation and end (as the what-if once kept them, a curve
// per part): the reference the replay must agree with.
func everyState(c *curves) [][numParts]int64 {
	h := c.h
	n := len(h.Device.Events)
	delta := make([][numParts]int64, n+2)
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.PendingAtStart {
			continue
		}
		add := func(p Part, n int64) {
			delta[b.Alloc+1][p] += n
			if end := b.AllocEnd(); end >= 0 {
				delta[end+1][p] -= n
			}
		}
		// A part that scales counts the bytes requested; the allocator's
		// rounding is fixed.
		if p := c.part[bi]; scales(p) && b.Requested > 0 && b.Requested < b.Size {
			add(p, b.Requested)
			add(PartFixed, b.Size-b.Requested)
		} else {
			add(p, b.Size)
		}
	}
	out := make([][numParts]int64, n+1)
	var run [numParts]int64
	for j := range out {
		for p := range run {
			run[p] += delta[j][p]
		}
		out[j] = run
	}
	return out
}

// TestCurvesAnswerAsEveryState: the what-if's replay looks only at the
// ends of runs of events that add memory, yet must answer exactly as a
// search of every state: the same projected peak and the first state that
// reaches it under any non-negative factors (zeros included: a technique
// that removes a part), the same largest sums of parts and their first
// states, the same largest batch and sequence factors. Checked on every
// real file, the simulator's runs and a generated training run, with the
// suggestions' effects, the scalings and random factors.
func TestCurvesAnswerAsEveryState(t *testing.T) {
	inputs := map[string]*snapshot.Snapshot{
		"demo":    analysistest.Read(t, st.Train(st.DemoConfig), 0),
		"healthy": analysistest.Read(t, st.TrainLoopHealthy(st.DefaultLeakConfig), 0),
		"autocast": analysistest.Read(t, st.TrainLoopGrowingList(st.LeakConfig{Layers: 3, Hidden: 128, Tokens: 256, Vocab: 300, Steps: 5,
			Autocast: true, Stacks: st.StacksUserCpp}), 0),
		"eager attention": analysistest.Read(t, st.EagerTrain(st.EagerConfig{Layers: 3, Hidden: 512, Heads: 8, KVHeads: 2, Seq: 128, Batch: 2, Vocab: 5000, Steps: 2, Frames: "module"}), 0),
	}
	for _, path := range st.SharedInputs(t) {
		inputs[path] = analysistest.Open(t, path)
	}
	rng := rand.New(rand.NewSource(1))
	weights := []float64{0, 0.25, 0.5, 1, 2, 8}
	var fs []factors
	fs = append(fs, unit())
	for _, e := range effects() {
		fs = append(fs, e.f)
	}
	for _, k := range []float64{0.5, 2, 8} {
		fs = append(fs, scaled(k, 1), scaled(1, k))
	}
	for range 40 {
		var f factors
		for p := range f {
			f[p] = weights[rng.Intn(len(weights))]
		}
		fs = append(fs, f)
	}
	var sets [][]Part
	for p := Part(0); p < numParts; p++ {
		sets = append(sets, []Part{p})
		if q := Part(rng.Intn(int(numParts))); q != p { // a set: each part once
			sets = append(sets, []Part{p, q})
		}
	}
	states, split, merged := 0, 0, 0
	defer func(n int) { replaySplitEvents = n }(replaySplitEvents)
	for _, mode := range []struct {
		name   string
		events int // the fewest events replay splits
	}{{"one pass", math.MaxInt}, {"two passes", 16}} {
		replaySplitEvents = mode.events
		for name, s := range inputs {
			name := mode.name + ": " + name
			for _, d := range s.Devices {
				if len(d.Events) == 0 {
					continue
				}
				h := history.Build(s, d)
				c := buildCurves(h, 0)
				all := everyState(c)
				states += len(all)
				for j, v := range statesOf(buildCurves(h, 0)) {
					if v != all[j] {
						t.Fatalf("%s device %d state %d: replayed %v, from the blocks %v", name, d.ID, j, v, all[j])
					}
				}
				type limitCase struct {
					limit int64
					seq   bool
				}
				peak, _ := c.peak(unit())
				var limits []limitCase
				for _, l := range []int64{peak / 2, peak, 2 * peak, 10 * peak} {
					limits = append(limits, limitCase{l, false}, limitCase{l, true})
				}
				// One resolve for all, as the what-if asks.
				got := make([]peakAt, len(fs))
				gotSums := make([]peakSum, len(sets))
				gotLimits := make([]float64, len(limits))
				c.resolve(func() {
					for k, f := range fs {
						b, j := c.peak(f)
						got[k] = peakAt{float64(b), j}
					}
					for k, ps := range sets {
						parts, _ := c.partsAtMax(ps...)
						gotSums[k] = peakSum{c.maxOf(ps...), c.argmax(ps...), parts}
					}
					for k, l := range limits {
						gotLimits[k] = c.maxFactor(l.limit, l.seq)
					}
				})
				split, merged = split+c.split, merged+c.merged
				for k, f := range fs {
					if !slices.Contains(f[:], 0) {
						if v := c.at(got[k].at); v != all[got[k].at] {
							t.Errorf("%s device %d factors %v: state at the peak %v, every state %v", name, d.ID, f, v, all[got[k].at])
						}
					}
					best, bj := math.Inf(-1), 0
					for j := range all {
						if v := dot(f, &all[j]); v > best {
							best, bj = v, j
						}
					}
					if want := (peakAt{float64(saturate(best)), bj}); got[k] != want {
						t.Errorf("%s device %d factors %v: peak %v, every state %v", name, d.ID, f, got[k], want)
					}
				}
				for k, ps := range sets {
					var best int64
					first, firstVal := 0, int64(-1)
					for j := range all {
						var sum int64
						for _, p := range ps {
							sum += all[j][p]
						}
						best = max(best, sum)
						if sum > firstVal {
							first, firstVal = j, sum
						}
					}
					var parts [numParts]int64
					for _, p := range ps {
						parts[p] = all[first][p]
					}
					if want := (peakSum{best, first, parts}); gotSums[k] != want {
						t.Errorf("%s device %d parts %v: largest %v, every state %v", name, d.ID, ps, gotSums[k], want)
					}
				}
				for k, l := range limits {
					want := math.Inf(1)
					for j := range all {
						f := factorAt(&all[j], l.limit, l.seq)
						if f < 0 {
							want = 0
							break
						}
						want = min(want, f)
					}
					if gotLimits[k] != want {
						t.Errorf("%s device %d limit %d seq %v: factor %v, every state %v", name, d.ID, l.limit, l.seq, gotLimits[k], want)
					}
				}
			}
		}
	}
	// The second half starts where the first ends on every real file: a
	// split is never replayed again in one pass.
	if merged == 0 || merged != split {
		t.Errorf("%d replays were merged from two passes of the %d split", merged, split)
	}
	t.Logf("%d inputs, %d states, %d factors, %d sets of parts, %d replays merged from two passes", len(inputs), states, len(fs), len(sets), merged)
}
