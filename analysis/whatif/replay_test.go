package whatif_test

import (
	"testing"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/analysis/estimate"
	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/analysis/whatif"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/result"
)

// TestWhatIfOneReplay: the what-if of a run replays its events once (its
// queries gathered; the states it reads kept by that replay), and the
// projection to another size twice (its plan's peaks without each member
// depend on the plan).
func TestWhatIfOneReplay(t *testing.T) {
	s := analysistest.OpenShared(t, "snapshots", "nothanmin_fullstep.pickle")
	r := analysis.Analyze(s, analysis.DefaultOptions())
	h := history.Build(s, s.Devices[0]) // the file's one device, the one the what-if is about
	c := whatif.BuildCurves(h, 0)
	var w *result.WhatIf
	c.Resolve(func() { w = c.WhatIf(&r.Devices[0], r.Suggestions, 0) })
	if c.Replays() != 1 || w.MeasuredPeakBytes != r.WhatIf.MeasuredPeakBytes {
		t.Errorf("%d replays for the what-if (peak %d, the analysis' %d)", c.Replays(), w.MeasuredPeakBytes, r.WhatIf.MeasuredPeakBytes)
	}
	c = whatif.BuildCurves(h, 0)
	gpu := estimate.NewGPU("", 24<<30)
	c.Resolve(func() { c.Project(r, 2, 1, whatif.Size{Batch: 4}, whatif.Size{Batch: 8}, gpu) })
	if c.Replays() > 2 {
		t.Errorf("%d replays for a projection", c.Replays())
	}
}
