package leaks

import (
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
)

// TestStepAt: the step holding an event, found in the steps when they are
// apart, is the one a per-event index gives (the index is kept for steps
// that overlap, or with an empty one among them).
func TestStepAt(t *testing.T) {
	const n = 40
	r := func(s, e int) history.StepRange { return history.StepRange{Start: s, End: e} }
	for _, c := range []struct {
		name  string
		steps []history.StepRange
		apart bool
	}{
		{"partition", []history.StepRange{r(0, 9), r(10, 19), r(20, 39)}, true},
		{"gaps", []history.StepRange{r(3, 5), r(8, 8), r(12, 30)}, true},
		{"past the events", []history.StepRange{r(30, 35), r(36, 50)}, true},
		{"one step", []history.StepRange{r(5, 7)}, true},
		{"overlap", []history.StepRange{r(0, 10), r(10, 20)}, false},
		{"nested", []history.StepRange{r(0, 30), r(5, 8)}, false},
		{"empty step", []history.StepRange{r(0, 20), r(25, 3), r(10, 15)}, false},
	} {
		if got := apart(c.steps); got != c.apart {
			t.Errorf("%s: apart %v, want %v", c.name, got, c.apart)
		}
		want := make([]int, n)
		for i := range want {
			want[i] = -1
		}
		for k, st := range c.steps {
			for i := st.Start; i <= st.End && i < n; i++ {
				want[i] = k
			}
		}
		sc := &leakScan{steps: c.steps}
		if !c.apart {
			sc.stepOf = make([]int32, n)
			for i := range want {
				sc.stepOf[i] = int32(want[i])
			}
		}
		for i := range n {
			if got := sc.stepAt(i); got != want[i] {
				t.Errorf("%s: event %d in step %d, want %d", c.name, i, got, want[i])
			}
		}
	}
}
