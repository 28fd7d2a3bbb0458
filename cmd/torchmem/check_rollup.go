package main

import (
	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/check"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/rollup"
	"github.com/torchmem/torchmem/snapshot"
)

// isCheckInput says whether a file found in a folder is one check takes: a
// snapshot, a trace, or torchmem's JSON.
func isCheckInput(head []byte) bool { return load.LooksLikeInput(head) || isSummary(head) }

// isRollupFile says whether path holds a roll-up (torchmem.rollup/v1).
func isRollupFile(path string) bool {
	if path == "-" {
		return false
	}
	head, err := load.Head(path)
	return err == nil && result.JSONSchema(head) == rollup.SchemaID
}

// summaryLimit is the most bytes one JSON summary may take.
func (g *globals) summaryLimit() (int64, error) {
	sopts, err := g.options()
	if err != nil {
		return 0, err
	}
	if sopts.MaxInputBytes > 0 {
		return sopts.MaxInputBytes, nil
	}
	return snapshot.DefaultMaxInputBytes, nil
}

// checkLoader turns one input of check into its results: the inputs of a
// roll-up (named by their own paths), an analysis's JSON (named by the JSON
// file, as check names a single one), or the analysis of a snapshot or
// trace.
func (g *globals) checkLoader(opts analysis.Options) func(string) ([]*result.Result, error) {
	return func(path string) ([]*result.Result, error) {
		switch {
		case isRollupFile(path):
			limit, err := g.summaryLimit()
			if err != nil {
				return nil, err
			}
			var rs []*result.Result
			err = g.readSummaries(path, limit, func(r *result.Result) error {
				rs = append(rs, r)
				return nil
			}, nil)
			return rs, err
		case path == "-" || isAnalysisFile(path):
			r, err := g.loadResult(path, opts)
			return []*result.Result{r}, err
		}
		r, err := g.analyzeOne(path, opts)
		return []*result.Result{r}, err
	}
}

// isAnalysisFile says whether path holds an analysis (torchmem.analysis/v1).
func isAnalysisFile(path string) bool {
	head, err := load.Head(path)
	return err == nil && result.JSONSchema(head) == result.SchemaID
}

// loadBaselines reads check's --baseline: a roll-up gives each rank its own
// baseline; anything else (an analysis, a snapshot, a trace) is the baseline
// of every rank.
func (g *globals) loadBaselines(path string, opts analysis.Options) (*check.Baselines, error) {
	if !isRollupFile(path) {
		r, err := g.loadResult(path, opts)
		if err != nil {
			return nil, err
		}
		return check.OneBaseline(g.budget.fit(r)), nil
	}
	limit, err := g.summaryLimit()
	if err != nil {
		return nil, err
	}
	b := check.NewBaselines()
	err = g.readSummaries(path, limit, func(r *result.Result) error {
		b.Add(g.budget.fit(r))
		return nil
	}, nil)
	return b, err
}
