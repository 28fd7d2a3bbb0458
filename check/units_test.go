package check

import (
	"strings"
	"testing"

	"github.com/torchmem/torchmem/result"
)

// TestBaselineInRequestedBytes: a baseline written before torchmem counted
// allocator blocks (no allocated_unit) is still compared, with a note that
// its figures are requested bytes; a baseline in the run's unit gets no
// note; one in another unit (a memory timeline's tensor sizes against a
// snapshot's blocks) gets a note naming both.
func TestBaselineInRequestedBytes(t *testing.T) {
	for _, tc := range []struct {
		base, run string
		note      string // "" for none
	}{
		{"", result.AllocatedUnit, "the baseline counts requested bytes"},
		{result.AllocatedUnit, result.AllocatedUnit, ""},
		{result.AllocatedUnitTensor, result.AllocatedUnitTensor, ""},
		{result.AllocatedUnit, result.AllocatedUnitTensor, "the baseline counts allocator blocks (a snapshot's or chrome trace's figures), this run tensor sizes"},
		{result.AllocatedUnitTensor, result.AllocatedUnit, "the baseline counts tensor sizes (a memory timeline's figures), this run allocator blocks"},
		{"", result.AllocatedUnitTensor, "the baseline counts requested bytes (written before torchmem counted allocator blocks), this run tensor sizes"},
	} {
		base, run := checkRun(), checkRun()
		base.AllocatedUnit, run.AllocatedUnit = tc.base, tc.run
		cr, err := Check(run, Options{Device: 0, Baseline: base, Tolerance: Tolerance{Percent: 5}})
		if err != nil {
			t.Fatal(err)
		}
		var notes []string
		for _, it := range cr.Checks {
			if strings.Contains(it.Name, "units vs baseline") {
				notes = append(notes, it.Message)
				if it.Status != CheckSkip {
					t.Errorf("the units note is a %s check", it.Status)
				}
			}
		}
		if ok := tc.note == "" && len(notes) == 0 || len(notes) == 1 && strings.Contains(notes[0], tc.note); !ok || !cr.OK() {
			t.Errorf("baseline unit %q, run %q: notes %q (want %q), ok %v", tc.base, tc.run, notes, tc.note, cr.OK())
		}
	}
}
