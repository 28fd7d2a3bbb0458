package analysis

import (
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/analysis/suggest"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// TestSavingsMatchWhatIfEveryRealFile: on every real file, each suggestion
// states the saving the what-if projects for the same change — the peak of
// the run's curves without it, less the peak under it — and no suggestion
// saves nothing; what only releases cached memory (reserved_only) is the
// one the what-if cannot take off the allocated peak.
func TestSavingsMatchWhatIfEveryRealFile(t *testing.T) {
	projected := 0
	for _, f := range snapshottest.SharedInputs(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := load.Open(f, snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := Analyze(s, DefaultOptions())
			if len(r.Suggestions) > 0 && r.WhatIf == nil && r.Devices[0].Peak.EventIndex >= 0 {
				t.Fatalf("%d suggestions and no what-if", len(r.Suggestions))
			}
			if r.WhatIf == nil {
				return
			}
			byID := map[string]result.Projection{}
			for _, p := range r.WhatIf.Suggestions {
				byID[p.ID] = p
			}
			for _, sg := range r.Suggestions {
				p, ok := byID[sg.ID]
				switch {
				case !ok:
					if suggest.LowersPeak(sg.ID) && sg.ID != "detach_or_item" && sg.ID != "no_grad_eval" {
						t.Errorf("%s: no what-if projection", sg.ID)
					}
				case p.Method == "reserved_only":
				case p.SavingBytes != sg.EstimatedSavingsBytes:
					t.Errorf("%s saves %d, the what-if %d (%s)", sg.ID, sg.EstimatedSavingsBytes, p.SavingBytes, p.Method)
				case p.SavingBytes <= 0:
					t.Errorf("%s saves nothing", sg.ID)
				default:
					projected++
				}
			}
		})
	}
	if projected < 20 {
		t.Errorf("%d suggestions checked against the what-if: the test sees too little", projected)
	}
}
