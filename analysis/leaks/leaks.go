package leaks

import (
	"fmt"
	"math"
	"sort"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// This file holds the leak pass: Detect, its kinds and thresholds, and
// the scan of one device's steps. The steps are compared in steps.go;
// the findings are made in kept.go, cycle.go and growth.go.

// Thresholds of leak detection.
const (
	minPatternSteps  = 3        // steps a pattern must be seen in
	minGraphSites    = 4        // sites a step's survivors span to be a graph
	minGrowthBytes   = 64 << 10 // total growth below this is noise
	highLeakBytes    = 1 << 20  // a high-confidence finding holds at least this
	maxGrowingLists  = 5        // growing_list findings per device at most
	explainedGrowth  = 0.7      // share of the drift the specific findings must explain
	forwardShareMin  = 0.6      // share of a graph's bytes allocated in forward
	graphShareMin    = 0.25     // share of the forward's allocations a graph keeps
	patternShareMin  = 0.6      // share of the eligible steps a pattern must be seen in
	highPatternShare = 0.8      // share of the eligible steps for high confidence
)

// Detect looks for memory that grows step after step on each device
// (hs holds one History per device, from history.Build) and returns the
// findings, most certain and largest first. s is the snapshot the histories
// were built from. Steps come from ProfilerStep#N ranges, else from
// optimizer steps, else from Optimizer.step or forward spans of a trace,
// else from the period of the repeating sequence of allocation sites. A block survives its step when it is still
// allocated after the next step ends; survivors that are never freed (or
// only after the last step) make retained_graph (many forward sites per
// step) or growing_list (one site) findings; survivors released together by
// a later step make reference_cycle; a rise of allocated memory at every
// step start that those do not explain makes step_growth. The first step
// (warm-up: optimizer state, workspaces) and the last (still in flight)
// never count as leaking. A rise of reserved memory alone is allocator
// caching or fragmentation, not a leak, and is not reported here.
func Detect(s *snapshot.Snapshot, hs []*history.History) []result.Leak {
	out := []result.Leak{}
	for _, h := range hs {
		if h == nil || h.Phases == nil || len(h.Device.Events) == 0 {
			continue
		}
		out = append(out, detectDeviceLeaks(h)...)
	}
	rank := map[result.Confidence]int{result.High: 0, result.Medium: 1, result.Low: 2}
	sort.SliceStable(out, func(a, b int) bool {
		x, y := &out[a], &out[b]
		if x.Device != y.Device {
			return x.Device < y.Device
		}
		if rank[x.Confidence] != rank[y.Confidence] {
			return rank[x.Confidence] < rank[y.Confidence]
		}
		return x.TotalBytes > y.TotalBytes
	})
	return out
}

// leakScan holds what one device's steps tell about survivors.
type leakScan struct {
	h     *history.History
	plan  *history.StepPlan
	steps []history.StepRange
	// stepOf is the step index of every event (−1 outside the steps) when
	// the steps overlap; nil when they are in order and apart (the rule:
	// a partition of the events), stepAt then finds it in them.
	stepOf []int32
	sites  *history.SiteCache
	// kept[k] are the blocks of eligible step k never freed (or freed only
	// after the last step); held[k] the same for every step, the first and
	// the last included (what the end holds); delayed are blocks freed by a
	// later step.
	kept    [][]int
	held    [][]int
	delayed []delayedBlock
	// backward says whether the steps have any backward event.
	backward bool
	// guessed lifetimes (allocations without an address, paired by size).
	guessed bool
}

type delayedBlock struct {
	bi         int
	from, upto int // step indices of the allocation and of the free
}

func detectDeviceLeaks(h *history.History) []result.Leak {
	if h.Steps == nil {
		return nil
	}
	var out []result.Leak
	for _, steps := range h.Steps.StepGroups() {
		out = append(out, groupLeaks(h, steps)...)
	}
	return out
}

// groupLeaks looks for leaks among one group of complete steps.
func groupLeaks(h *history.History, steps []history.StepRange) []result.Leak {
	if len(steps) < history.MinLeakSteps {
		return nil
	}
	sc := scanSurvivors(h, h.Steps, steps)
	var out []result.Leak
	out = append(out, sc.keptFindings()...)
	if l, ok := sc.cycleFinding(); ok {
		out = append(out, l)
	}
	if l, ok := sc.growthFinding(out); ok {
		out = append(out, l)
	}
	capacity := h.Device.CapacityBytes
	if capacity > 0 {
		last := sc.steps[len(sc.steps)-1]
		peak, _ := h.PeakIn(last.Start, last.End)
		peak = max(peak, 0)
		for i := range out {
			l := &out[i]
			if l.Kind == result.LeakReferenceCycle || l.BytesPerStep <= 0 {
				continue
			}
			l.StepsUntilFull = stepsUntilFull(capacity, peak, l.BytesPerStep)
			l.Evidence += fmt.Sprintf(" At %s per step the device (%s) is full in %d more steps.", units.FormatBytes(l.BytesPerStep), units.FormatBytes(capacity), l.StepsUntilFull)
		}
	}
	return out
}

// stepsUntilFull is how many more steps at rate bytes per step take a step's
// peak from peak to the capacity (at least 1).
func stepsUntilFull(capacity, peak, rate int64) int {
	if rate <= 0 {
		return 0
	}
	room := capacity - peak
	if room <= 0 {
		return 1
	}
	n := (room + rate - 1) / rate
	if n > math.MaxInt32 {
		n = math.MaxInt32
	}
	return int(max(n, 1))
}
