package analysis

import (
	"fmt"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
)

// TestPerParameterCopiesAreNoBatch: an EMA's shadow weights (one copy of
// each weight, made outside forward, backward and the optimizer step,
// before the first step, kept) live across every forward like a batch, but
// they are the parameters' sizes one for one: per-parameter state, not
// input — and so fixed memory in the what-if, not memory that scales
// with the batch — nor DDP's gradient buckets, whose run of allocations
// before the first forward sums to the gradients just as they do (DDP's
// own frames name its buckets). The batch itself stays input. Without
// frames the copies share the batch's (empty) stack and nothing tells
// them apart.
func TestPerParameterCopiesAreNoBatch(t *testing.T) {
	for _, kind := range frameKinds {
		for _, c := range []trainRun{
			{layers: 4, hidden: 512, tokens: 1024, steps: 3, ema: true},
			{layers: 12, hidden: 256, tokens: 4096, steps: 2, ema: true},
			{layers: 6, hidden: 1024, tokens: 256, steps: 2, ema: true, ws: 32 << 20},
		} {
			t.Run(fmt.Sprintf("%s, %d layers of %d²", kind, c.layers, c.hidden), func(t *testing.T) {
				x := fx{st.NewSim(), kind}
				c.run(x)
				s := analysistest.Read(t, x.s, 0)
				h := history.Build(s, s.Device(0))
				// The copies are the allocations made before the first batch.
				firstBatch := int32(-1)
				for bi := range h.Blocks {
					if b := &h.Blocks[bi]; b.Requested == c.tokens*8 && b.Alloc >= 0 && (firstBatch < 0 || b.Alloc < firstBatch) {
						firstBatch = b.Alloc
					}
				}
				var copies, batches, asInput int64
				for bi := range h.Blocks {
					b := &h.Blocks[bi]
					switch {
					case b.Alloc >= 0 && b.Alloc < firstBatch:
						copies += b.Requested
						if b.Category == result.InputData || kind != "no frames" && b.Category == result.Gradient {
							asInput += b.Requested
							t.Logf("copy taken for %s (%s)", b.Category, b.Rule())
						}
					case b.Requested == c.tokens*8:
						batches++
						if b.Category != result.InputData {
							t.Errorf("the batch is %s (%s), want input", b.Category, b.Rule())
						}
					}
				}
				if want := int64(c.layers) * c.hidden * c.hidden * 4; copies != want {
					t.Fatalf("%d B of copies found, want %d", copies, want)
				}
				if kind != "no frames" && asInput != 0 {
					t.Errorf("%d B of the EMA's copies taken for a batch or DDP's gradient buckets", asInput)
				}
				if batches != int64(c.steps) {
					t.Errorf("%d batches, want %d", batches, c.steps)
				}
			})
		}
	}
}

// TestPerParameterCopiesZeroOrder: zidongliu's zeroth-order estimator
// keeps a curvature estimate per parameter (adam_forward.py: a list of one
// tensor per parameter, made in __init__ and remade by each update,
// outside forward, backward and any optimizer step). At the dump its 196
// tensors (501,710,848 B in blocks) are those copies, not input; the
// input left is the 4 KiB of the batch.
func TestPerParameterCopiesZeroOrder(t *testing.T) {
	r := Analyze(analysistest.OpenShared(t, "snapshots", "genF_torch2.8_zidongliu_zeroth_order_fl.pickle"), DefaultOptions())
	d := r.Devices[0]
	var copies result.RuleUse
	for _, u := range d.Rules {
		if u.Rule == history.RulePerParameterCopies {
			copies = u
		}
	}
	if copies.Blocks != 196 || copies.Bytes != 501_710_848 || copies.Category != result.Unknown {
		t.Errorf("per-parameter copies %+v, want 196 unknown blocks of 501,710,848 B", copies)
	}
	if in := d.AtEnd.Categories[result.InputData]; in != 4096 {
		t.Errorf("input at the end %d B, want the batch's 4,096", in)
	}
	if !hasDiag(r, "per_parameter_copies") {
		t.Errorf("no per_parameter_copies note")
	}
}
