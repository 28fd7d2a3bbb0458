package history

import (
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestSameWaySameCategory: on every real file, blocks made the same way —
// the same stack (with frames), the same requested size and the same
// phase pattern within a step (the phases at allocation and at free, freed
// in the same step or not, made before the recording, never freed, and in
// a chrome trace freed inside the op that made it) — get one category.
// PyTorch's own categories (memory timelines) and blocks without frames
// (nothing tells them apart but their pairing with gradients and state)
// are left out. Before, the one forward temporary live at an OOM was an
// activation while its siblings were temporaries (nesta: 96 MiB and
// 384 MiB; constructorsun: 4.9 GiB).
func TestSameWaySameCategory(t *testing.T) {
	shared := st.SharedDir(t, "")
	for _, path := range st.SharedInputs(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(path, shared), "/")
		t.Run(rel, func(t *testing.T) {
			s, err := load.Open(path, snapshot.Options{})
			if err != nil {
				t.Skipf("%v", err) // a file the loader refuses: other tests say why
			}
			for _, d := range s.Devices {
				h := Build(s, d)
				type way struct {
					stack                   snapshot.StackID
					size                    int64
					ac, fc                  uint8
					pre, never, step, intra bool
				}
				first := map[way]*Block{}
				split := map[way]bool{}
				for bi := range h.Blocks {
					b := &h.Blocks[bi]
					if b.Untracked || b.Rule() == RuleProfilerCategory || len(s.StackOf(b.Stack)) == 0 {
						continue
					}
					// the events as recorded: a block freed while an OOM
					// unwound was freed in the phase it was made in
					w := way{stack: b.Stack, size: b.Requested, pre: b.Alloc < 0, never: b.Free < 0, intra: h.facts(bi).is(intraOp)}
					if b.Alloc >= 0 {
						w.ac = h.Phases.Code[b.Alloc]
					}
					if b.Free >= 0 {
						w.fc = h.Phases.Code[b.Free]
						w.step = b.Alloc >= 0 && h.Phases.StepAt(int(b.Free)) == h.Phases.StepAt(int(b.Alloc))
					}
					if o, ok := first[w]; !ok {
						first[w] = b
					} else if o.Category != b.Category && !split[w] {
						split[w] = true
						t.Errorf("device %d: blocks of %d B made at one stack in %s: %s (%s) and %s (%s)", d.ID, b.Requested,
							h.Phases.At(max(int(b.Alloc), 0)), o.Category, o.Rule(), b.Category, b.Rule())
					}
				}
			}
		})
	}
}
