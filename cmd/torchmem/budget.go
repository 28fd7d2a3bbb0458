package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/result"
)

// The output budget of one run. What torchmem prints of a result is its
// figures and its text; the text is bounded first (analysis.TextBudget:
// every string counts each time a result holds it, and past the budget a
// long one is cut with a marker), then everything a run writes — standard
// output, -o, --junit, the job summary, in every format — counts against
// one budget, past which the run fails (exit 2) instead of writing on.
// A file's names are cut to 4 KB when read (snapshot), so without these a
// name shared by every device was printed once per device and line: a
// 7 KB gzip made analyze write 810 MB.
const (
	// textBudgetBase and textBudgetPerByte: the text of a run's results
	// may take this many bytes, plus this many per byte of input (after
	// gzip or base64: a file's own text is shown whole).
	textBudgetBase    = 4 << 20
	textBudgetPerByte = 1
	// outputBudgetBase and outputBudgetPerByte: a run writes at most this
	// many bytes, or this many per byte of its input when that is more.
	outputBudgetBase    = 64 << 20
	outputBudgetPerByte = 8
)

// runBudget is the output budget of one run: the text of the results read
// so far, and the bytes written.
type runBudget struct {
	text       *analysis.TextBudget
	fitted     map[*result.Result]bool
	inputBytes int64 // input read, after gzip or base64
	written    int64
}

func newRunBudget() *runBudget {
	return &runBudget{text: analysis.NewTextBudget(textBudgetBase), fitted: map[*result.Result]bool{}}
}

// fit counts a result's input in the budget and its text against it,
// cutting what is past it (once per result, in the order the run renders
// them). A nil budget (commands built without run, in tests) fits all.
func (b *runBudget) fit(r *result.Result) *result.Result {
	if b == nil || r == nil || b.fitted[r] {
		return r
	}
	b.fitted[r] = true
	b.inputBytes += r.Input.ReadBytes
	b.text.Grow(textBudgetPerByte * r.Input.ReadBytes)
	b.text.Fit(r)
	return r
}

// limit is the most bytes the run may write.
func (b *runBudget) limit() int64 {
	return max(outputBudgetBase, outputBudgetPerByte*b.inputBytes)
}

// errOutputBudget is a run's output past its budget.
var errOutputBudget = errors.New("past the output budget")

// charge counts n bytes written, and fails past the limit.
func (b *runBudget) charge(n int) error {
	if b == nil {
		return nil
	}
	b.written += int64(n)
	if b.written > b.limit() {
		return fmt.Errorf("%w of %d bytes (%d MiB, or %d bytes per byte of input when more): the input names the same text over and over",
			errOutputBudget, b.limit(), outputBudgetBase>>20, outputBudgetPerByte)
	}
	return nil
}

// budgetWriter charges what it writes to a run's budget.
type budgetWriter struct {
	w io.Writer
	b *runBudget
}

func (w budgetWriter) Write(p []byte) (int, error) {
	if err := w.b.charge(len(p)); err != nil {
		return 0, err
	}
	return w.w.Write(p)
}
