package analysis

import (
	"errors"

	"github.com/torchmem/torchmem/analysis/estimate"
	"github.com/torchmem/torchmem/analysis/whatif"
	"github.com/torchmem/torchmem/snapshot"
)

// Project projects the measured run of s, recorded at size at, to size to
// (a zero field keeps the measured one): the projected peak is TotalBytes
// of an estimate (schema torchmem.estimate/v1) whose parts are those at
// the projected peak. gpu, when given, is the device to fit (else the
// file's capacity, when it records one); the plan is the cheapest
// combination of the run's suggestions that fits at the projected size.
func Project(s *snapshot.Snapshot, opts Options, at, to whatif.Size, gpu *estimate.GPU) (*estimate.Result, error) {
	to, err := whatif.Target(at, to)
	if err != nil {
		return nil, err
	}
	opts.NoTimeline = true
	if gpu != nil {
		opts.CapacityBytes = gpu.CapacityBytes
	}
	r, h := analyze(s, opts)
	if h == nil || r.WhatIf == nil {
		return nil, errors.New("no allocation history to project (a state-only snapshot has none)")
	}
	return whatif.Project(h, r, at, to, gpu), nil
}
