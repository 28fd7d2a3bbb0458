package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/report"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/rollup"
	"github.com/torchmem/torchmem/snapshot"
)

// aheadPerWorker bounds how far the analyses may run ahead of the input
// whose result is awaited (results finished out of order wait in memory).
const aheadPerWorker = 4

// analyzeAll analyses paths on as many goroutines as there are cores, one
// input each at a time, and hands every result to use in input order. Each
// input's model is dropped as soon as it is analysed, so memory follows the
// inputs being analysed at once, not all of them. An input that cannot be
// read is handed to fail, in input order, and the run goes on unless fail
// returns an error; without fail, the first stops the run with its error.
func (g *globals) analyzeAll(paths []string, opts analysis.Options, use func(*result.Result) error, fail func(string, error) error) error {
	return g.loadAll(paths, func(path string) ([]*result.Result, error) {
		r, err := g.analyzeOne(path, opts)
		return []*result.Result{r}, err
	}, use, fail)
}

// loadAll is analyzeAll with load turning each path into its results (an
// analysis of a snapshot, or the analyses a JSON file holds).
func (g *globals) loadAll(paths []string, load func(string) ([]*result.Result, error), use func(*result.Result) error, fail func(string, error) error) error {
	workers := min(runtime.GOMAXPROCS(0), len(paths))
	g.boundMemoryFor(paths, workers)
	type done struct {
		rs  []*result.Result
		err error
	}
	slots := make([]chan done, len(paths))
	for i := range slots {
		slots[i] = make(chan done, 1)
	}
	jobs, window, quit := make(chan int), make(chan struct{}, workers*aheadPerWorker), make(chan struct{})
	go func() {
		defer close(jobs)
		for i := range paths {
			select {
			case window <- struct{}{}:
			case <-quit:
				return
			}
			select {
			case jobs <- i:
			case <-quit:
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				rs, err := load(paths[i])
				slots[i] <- done{rs, err}
			}
		}()
	}
	sizes, total := inputSizes(paths)
	var prog *progress
	if f, width, ok := progressEnabled(g.stderr, g.quiet, os.Getenv); ok {
		prog = startProgress(f, width, fmt.Sprintf("%d inputs", len(paths)), total, time.Now)
		defer prog.end()
	}
	var err error
	var read int64
	for i := range paths {
		d := <-slots[i]
		err = d.err
		if err != nil && fail != nil {
			err = fail(paths[i], err)
		} else {
			for _, r := range d.rs {
				if err == nil {
					err = use(g.budget.fit(r))
				}
			}
		}
		if err != nil {
			break
		}
		<-window
		if read += sizes[i]; prog != nil {
			prog.set(read)
		}
	}
	close(quit) // the dispatcher stops; the workers finish what they hold
	wg.Wait()
	return err
}

// inputSizes are the sizes of the files (0 for stdin or a file that cannot
// be read), and their sum: what the progress line counts.
func inputSizes(paths []string) ([]int64, int64) {
	sizes := make([]int64, len(paths))
	var total int64
	for i, p := range paths {
		if st, err := os.Stat(p); err == nil && p != "-" {
			sizes[i] = st.Size()
			total += sizes[i]
		}
	}
	return sizes, total
}

// analyzeOne reads and analyses one input of many: no progress bar of its
// own, no collector setting of its own (analyzeAll sets one for all).
func (g *globals) analyzeOne(path string, opts analysis.Options) (*result.Result, error) {
	sopts, err := g.options()
	if err != nil {
		return nil, err
	}
	var s *snapshot.Snapshot
	if path == "-" {
		s, err = load.Read(g.stdin, "-", -1, sopts)
	} else {
		s, err = load.Open(path, sopts)
	}
	if err != nil {
		return nil, err
	}
	if opts.Device >= 0 && s.Device(opts.Device) == nil {
		return nil, &exitError{exitInput, fmt.Errorf("%s: no device %d in this file", path, opts.Device)}
	}
	return analysis.Analyze(s, opts), nil
}

// boundMemoryFor sets the collector for analysing paths, workers at a
// time: as boundMemory does for one input, from the sizes of the largest
// inputs that can be analysed at once.
func (g *globals) boundMemoryFor(paths []string, workers int) {
	var sizes []int64
	for _, p := range paths {
		if p == "-" || isGzip(p) { // a compressed size says little of the memory needed
			continue
		}
		if st, err := os.Stat(p); err == nil {
			sizes = append(sizes, st.Size())
		}
	}
	slices.Sort(sizes)
	var sum int64
	for _, s := range sizes[max(len(sizes)-workers, 0):] {
		sum += s
	}
	boundMemory(sum)
}

// rollupOutput writes a roll-up in one format while its inputs' results
// arrive in input order: JSON streams each result out at once; the other
// formats keep only the roll-up's rows and the few results they show whole.
type rollupOutput struct {
	out report.RollupWriter
	b   *rollup.Builder
	// strict makes an input that cannot be read end the run; otherwise it
	// is listed in the roll-up, and its error (the first few) kept for
	// stderr.
	strict   bool
	failed   int
	failures []string
}

// maxFailureLines is how many unreadable inputs stderr names one by one.
const maxFailureLines = 8

// newRollupOutput starts a roll-up in format on w; ranks is the --rank
// flag: the ranks shown in full besides the worst and the first OOM, with
// textTop sites each in text.
func newRollupOutput(w io.Writer, format, ranks string, textTop int) (*rollupOutput, error) {
	wr, err := lookupFormat(report.Rollups, format)
	if err != nil {
		return nil, err
	}
	keep := &rollup.Keeper{}
	if err := parseRanks(ranks, keep); err != nil {
		return nil, err
	}
	o := &rollupOutput{b: rollup.NewBuilder()}
	o.out = wr.Write(w, report.Options{Top: textTop, Keep: keep, HTML: report.HTMLOptions{Version: version}})
	return o, nil
}

// parseRanks reads the --rank flag into k: "" (none), "all", or a list of
// ranks such as 0,3,7.
func parseRanks(s string, k *rollup.Keeper) error {
	if s == "" {
		return nil
	}
	if s == "all" {
		k.All = true
		return nil
	}
	k.Ranks = map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return &exitError{exitInput, fmt.Errorf("--rank %q: want all or a list of ranks such as 0,3,7", s)}
		}
		k.Ranks[n] = true
	}
	return nil
}

// add takes the next input's result.
func (o *rollupOutput) add(r *result.Result) error {
	o.b.Add(r)
	return o.out.Input(r)
}

// fail takes an input that could not be read: with strict, its error ends
// the run; otherwise the roll-up lists it and the run goes on.
func (o *rollupOutput) fail(path string, err error) error {
	var ee *exitError
	if o.strict || errors.As(err, &ee) && ee.code != exitInput {
		return err
	}
	o.failed++
	if len(o.failures) < maxFailureLines {
		o.failures = append(o.failures, units.OneLine(err.Error()))
	}
	o.b.Fail(path, failReason(path, err))
	return nil
}

// failReason is an input's error without its path, which the roll-up
// shows beside it.
func failReason(path string, err error) string {
	var se *snapshot.Error
	if errors.As(err, &se) && se.Path == path {
		return units.OneLine(strings.TrimPrefix(se.Error(), units.OneLine(path)+": "))
	}
	return units.OneLine(strings.TrimPrefix(err.Error(), path+": "))
}

// status is how the run ends once the roll-up is written: nil when every
// input was read, else the unreadable inputs on w (the first few) and exit
// status 3.
func (o *rollupOutput) status(w io.Writer) error {
	if o == nil || o.failed == 0 {
		return nil
	}
	o.tellFailures(w)
	return &exitError{exitPartial, fmt.Errorf("%s of %d could not be read (listed in the roll-up; --strict stops at the first)",
		units.Plural(o.failed, "input"), o.failed+o.b.Results())}
}

// tellFailures names the unreadable inputs on w, the first few.
func (o *rollupOutput) tellFailures(w io.Writer) {
	for _, f := range o.failures {
		fmt.Fprintf(w, "torchmem: %s\n", f)
	}
	if more := o.failed - len(o.failures); more > 0 {
		fmt.Fprintf(w, "torchmem: … %s more could not be read\n", units.Plural(more, "input"))
	}
}

// finish writes the roll-up: nothing when no input could be read (exit 2,
// naming them).
func (o *rollupOutput) finish(stderr io.Writer) error {
	if o.b.Results() == 0 && o.failed > 0 {
		if o.failed == 1 {
			return &exitError{exitInput, errors.New(o.failures[0])}
		}
		o.tellFailures(stderr)
		return &exitError{exitInput, fmt.Errorf("none of the %d inputs could be read", o.failed)}
	}
	return o.out.Finish(o.b.Rollup())
}
