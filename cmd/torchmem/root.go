package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/report"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // a check or regression failed
	exitInput  = 2 // bad input or usage
	// exitPartial: several inputs were rolled up, and some of them could
	// not be read (the roll-up of the others is written and lists them).
	exitPartial = 3
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// exitError carries an exit code with an error. Without an error it is a
// status to exit with and nothing to print (torchmem record passes on the
// command's own).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// globals are the flags every command shares, and the progress line.
type globals struct {
	maxInput string
	quiet    bool
	stdin    io.Reader
	stderr   io.Writer
	prog     *progress
	// progressTo, set by tests, gets the progress line whatever stderr is.
	progressTo io.Writer
	// bounded: the input open now set the collector (boundMemory).
	bounded bool
	// budget is the run's output budget (budget.go).
	budget *runBudget
}

func (g *globals) options() (snapshot.Options, error) {
	opts := snapshot.Options{}
	if g.maxInput != "" {
		n, err := units.ParseBytes(g.maxInput)
		if err != nil || n == 0 {
			return opts, &exitError{exitInput, fmt.Errorf("--max-input-bytes %q: want a size like 8GiB", g.maxInput)}
		}
		opts.MaxInputBytes = n
	}
	return opts, nil
}

// open reads one input file ("-" for stdin) with the shared options. On a
// terminal a progress line follows the read and then the analysis, until
// endProgress (analyze ends it).
func (g *globals) open(path string) (*snapshot.Snapshot, error) {
	opts, err := g.options()
	if err != nil {
		return nil, err
	}
	var s *snapshot.Snapshot
	bounded := false
	defer func() { g.bounded = bounded }()
	if path == "-" {
		opts.Progress = g.beginProgress(path, -1)
		s, err = load.Read(g.stdin, "-", -1, opts)
	} else {
		if st, err := os.Stat(path); err == nil {
			opts.Progress = g.beginProgress(path, st.Size())
			if !isGzip(path) { // a compressed size says little of the memory needed
				bounded = boundMemory(st.Size())
			}
		}
		s, err = load.Open(path, opts)
	}
	if err != nil {
		g.endProgress()
		return nil, err
	}
	if bounded {
		// The reader's records are garbage now and as large as the model:
		// collected at once, before the analysis allocates, they are not
		// beside its arrays at the peak. Their pages go back to the system
		// too: freed in pieces (a trace's spans), they could not hold the
		// analysis's large arrays, which came on top of them (the 1 GB
		// generated trace's replay at 297 MiB of RSS, 53 above the
		// reader's peak). Measured (alternated, 3 runs): the 200 MB
		// training snapshot 98-100 -> 97 MB, the dense one 223 -> 217 MB,
		// CPU unchanged within noise.
		debug.FreeOSMemory()
		debug.SetGCPercent(analysisGCPercent)
	}
	if g.prog != nil {
		g.prog.setStage("analysing")
	}
	return s, nil
}

// beginProgress starts the progress line of reading path (total bytes, −1
// when unknown) and returns the reader's callback, or nil when stderr gets
// no progress (not a terminal, TERM=dumb, --quiet).
func (g *globals) beginProgress(path string, total int64) func(int64) {
	g.endProgress()
	if g.progressTo != nil { // tests: a line drawn at once, often
		g.prog = startProgressTimed(g.progressTo, 100, path, total, time.Now, 0, time.Millisecond)
		return g.prog.set
	}
	f, width, ok := progressEnabled(g.stderr, g.quiet, os.Getenv)
	if !ok {
		return nil
	}
	g.prog = startProgress(f, width, path, total, time.Now)
	return g.prog.set
}

// endProgress wipes the progress line, before any output is written.
func (g *globals) endProgress() {
	if g.prog != nil {
		g.prog.end()
		g.prog = nil
	}
}

// analyze runs the analysis of an input open read, then ends its progress.
func (g *globals) analyze(s *snapshot.Snapshot, opts analysis.Options) *result.Result {
	r := analysis.Analyze(s, opts)
	if g.bounded {
		// The model and the analysis's records are garbage now, the bulk
		// of the heap, but the collector's goal was set while they were
		// live: the output would be written on top of them. Collected
		// now, it is written in their room.
		runtime.GC()
		// The output's garbage then piles on a live heap of a few MB: at
		// the analysis's GOGC a collection every few MB, 23 of them for the
		// 9 MB JSON of the 1 GB generated snapshot. At the default, 8, in
		// room the analysis left.
		debug.SetGCPercent(outputGCPercent)
	}
	g.endProgress()
	return r
}

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "torchmem",
		Short: "Post-mortem of PyTorch GPU memory from snapshots and profiler traces",
		Long: `torchmem reads the files a PyTorch job leaves behind — CUDA memory snapshots
(torch.cuda.memory._dump_snapshot) and profiler chrome traces
(prof.export_chrome_trace) — and says what filled the GPU, in which phase,
what leaked and what to change. Inputs are never executed.

Exit codes: 0 ok, 1 a check or regression failed, 2 bad input or usage,
3 some inputs of a roll-up could not be read (the others were rolled up).`,
		Example: `  torchmem analyze oom_snapshot.pickle
  torchmem report oom_snapshot.pickle -o report.html
  torchmem analyze --format markdown trace.json.gz > ticket.md
  torchmem check new.pickle --baseline base.json --tolerance 5%
  cat snapshot.pickle | torchmem info -`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionLine(),
	}
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.PersistentFlags().StringVar(&g.maxInput, "max-input-bytes", "", "stop when an input expands past this size after gzip/base64 decoding (default 8GiB; a gzip file, 64MiB + 128x its size)")
	root.PersistentFlags().BoolVarP(&g.quiet, "quiet", "q", false, "no progress line and no notes on stderr (errors and warnings only)")
	root.AddCommand(newInfoCmd(g), newAnalyzeCmd(g), newDiffCmd(g), newCheckCmd(g), newReportCmd(g),
		newEstimateCmd(g), newRecordCmd(g), newMergeCmd(g))
	return root
}

// inputCompletion completes snapshot and trace file names.
func inputCompletion(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return []cobra.Completion{"pickle", "pkl", "json", "gz", "html"}, cobra.ShellCompDirectiveFilterFileExt
}

// formatFlag adds --format: the names of a kind of result's writers, the
// first the default.
func formatFlag(cmd *cobra.Command, target *string, names []string) {
	cmd.Flags().StringVarP(target, "format", "f", names[0], "output format: "+strings.Join(names, ", "))
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(names, cobra.ShellCompDirectiveNoFileComp))
}

// lookupFormat finds --format's writer in a kind of result's table; an
// unknown name is bad usage.
func lookupFormat[F any](ws report.Writers[F], name string) (report.Writer[F], error) {
	w, err := ws.Lookup(name)
	if err != nil {
		return w, &exitError{exitInput, fmt.Errorf("--format %w", err)}
	}
	return w, nil
}

// run executes the command line and returns the exit code. Errors are one line.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	// A panic is a bug in torchmem; still, the user gets one line, not a
	// stack trace (set TORCHMEM_DEBUG=1 to see it).
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "torchmem: internal error (please report it with the input if you can): %v\n", r)
			if os.Getenv("TORCHMEM_DEBUG") != "" {
				fmt.Fprintf(stderr, "%s", debug.Stack())
			}
			code = exitInput
		}
	}()
	g := &globals{stdin: stdin, stderr: stderr, budget: newRunBudget()}
	defer g.endProgress()
	out := &outputWriter{w: budgetWriter{stdout, g.budget}}
	root := newRootCmd(g)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(out)
	root.SetErr(stderr)
	err := root.Execute()
	if out.err != nil {
		// The output is incomplete: that is the failure to report, once
		// (whatever else went wrong was likely caused by it).
		g.endProgress()
		fmt.Fprintf(stderr, "torchmem: %s\n", oneLine(outputError(out.err).Error()))
		return exitInput
	}
	if err == nil {
		return exitOK
	}
	code = exitInput
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.err == nil {
			return code
		}
	}
	fmt.Fprintf(stderr, "torchmem: %s\n", oneLine(err.Error()))
	if code == exitInput && !snapshot.IsInputError(err) && ee == nil {
		fmt.Fprintf(stderr, "Run 'torchmem --help' for usage.\n")
	}
	return code
}

// oneLine makes an error message one line.
func oneLine(msg string) string {
	return strings.ReplaceAll(strings.TrimSpace(msg), "\n", " ")
}

// isGzip reports whether the file starts with the gzip magic bytes.
func isGzip(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var head [2]byte
	n, _ := io.ReadFull(f, head[:])
	return n == 2 && head[0] == 0x1f && head[1] == 0x8b
}

// boundMemory makes the collector keep the heap within a quarter above
// what is live (GOGC=25 instead of Go's 100) once the input is large: the
// model and the analysis of a large snapshot hold most of their peak
// themselves, and the garbage a collection cycle lets pile up on top of it
// is what makes the peak RSS. A soft memory limit (its former way) cannot
// know that peak in advance: set below it, the collector runs without
// pause (the 170 MB dense snapshot took twice the CPU). The collections
// added cost a few percent of the CPU (make bench). A GOGC or GOMEMLIMIT
// set by the user wins. It reports whether it set the collector.
func boundMemory(inputBytes int64) bool {
	if inputBytes < 64<<20 || os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return false
	}
	debug.SetGCPercent(largeInputGCPercent)
	return true
}

// largeInputGCPercent is the GOGC of boundMemory while the input is read.
const largeInputGCPercent = 25

// analysisGCPercent is the GOGC of a bounded input's analysis, once it is
// read. The analysis's peak is the model and the analysis's per-block
// records, large arrays without pointers that a collection marks at little
// cost, so a tighter bound than the reader's costs next to nothing there
// (while the reader's memo, full of pointers, made GOGC=10 cost 5-10% of
// the CPU of a whole run). Measured, the reader at 25 in each case,
// alternated, three runs each: the 171 MB dense snapshot 264 -> 249 MiB
// peak RSS, 1.81 -> 1.83 s CPU; the 200 MB training one 117 -> 113 MiB,
// 1.01 -> 0.99 s; the 1 GB one 549 -> 519 MiB, 5.28 -> 5.18 s. At 10:
// 248, 108 and 519 MiB for 1.90, 1.11 and 5.18 s.
const analysisGCPercent = 15

// outputGCPercent is the GOGC of a bounded input's output, once analysed:
// the runtime's default.
const outputGCPercent = 100
