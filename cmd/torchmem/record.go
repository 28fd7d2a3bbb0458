package main

import (
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// recordHook is the Python start-up hook that `torchmem record` puts first
// on PYTHONPATH (see the file's own comment for what it does).
//
//go:embed hook/sitecustomize.py
var recordHook []byte

// recordOptions are the flags of torchmem record.
type recordOptions struct {
	dir        string
	maxEntries int
	stacks     string
	trace      bool
	noAnalyze  bool
}

func newRecordCmd(g *globals) *cobra.Command {
	var o recordOptions
	cmd := &cobra.Command{
		Use:   "record [flags] -- CMD [ARGS...]",
		Short: "Run a PyTorch program unchanged and record its GPU memory, then analyse it",
		Long: `record runs CMD as it is, with a Python start-up hook (a sitecustomize put
first on PYTHONPATH, which also runs the program's own sitecustomize). Once the
program imports torch and first uses CUDA, the hook records the allocator's
history (torch.cuda.memory._record_memory_history) and writes into DIR:

  oom_snapshot_rank{R}_{pid}.pickle  when CUDA runs out of memory, before the
                                     error reaches the program
  snapshot_rank{R}_{pid}.pickle      at exit, on SIGUSR1 while it runs, and
                                     on a SIGTERM the program does not handle
  trace_rank{R}_{pid}.json.gz        with --trace: a profiler trace of optimizer
                                     steps 2 to 5

R is the process's RANK (or LOCAL_RANK) as torchrun sets it. Send SIGUSR1 to
torchmem to have every recording process dump its snapshot now.

DIR is checked before CMD starts: it is created, or is an existing folder
(not a link) that is empty or holds only what record writes, and can be
written; anything else exits 2 at once. Files are written under new names
and renamed over theirs: a link planted in DIR is never written through.

When CMD ends, torchmem analyses what was written (the OOM snapshot first),
prints the summary on stderr, writes DIR/report.html, and exits with CMD's own
exit status (128+N when a signal N killed it, as shells do). With several
recording processes (torchrun's workers) the summary is their roll-up, as
'torchmem analyze DIR' prints it: the worst rank and its peak, the
imbalance, the first OOM by time, the ranks that stand out, and the files
that could not be read; report.html is the roll-up page, linking each
process's own page, report_rank{R}_{pid}.html. Without torch or CUDA it says
in one line why nothing was recorded.

The program is not otherwise changed: stdin, stdout and stderr are its own,
arguments pass as they are, and SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGUSR2
sent to torchmem are passed on (SIGINT and SIGQUIT typed at a terminal reach
the program directly). A SIGTERM that the program does not handle (torchrun
and batch schedulers stop jobs with it) makes the hook dump the snapshot
first, then the signal ends the process as it would have. A process killed
by SIGKILL writes no exit snapshot: send SIGUSR1 first.`,
		Example: `  torchmem record -- python train.py --lr 3e-4
  torchmem record -o oom-run --stacks all -- torchrun --nproc-per-node 8 train.py
  torchmem record --trace --no-analyze -- python train.py`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.stacks != "python" && o.stacks != "all" {
				return &exitError{exitInput, fmt.Errorf("--stacks %q: want python or all", o.stacks)}
			}
			if o.maxEntries < 1 {
				return &exitError{exitInput, fmt.Errorf("--max-entries %d: want at least 1", o.maxEntries)}
			}
			return runRecord(g, o, args, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	// Flags end at CMD: "torchmem record python train.py -o x" passes -o to train.py.
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVarP(&o.dir, "output", "o", "", "folder for the files (default torchmem-YYYYMMDD-HHMMSS)")
	cmd.Flags().IntVar(&o.maxEntries, "max-entries", 100000, "allocator events kept, the newest (~200 bytes each)")
	cmd.Flags().StringVar(&o.stacks, "stacks", "python", "python, or all (C++ frames too: slower dumps)")
	cmd.Flags().BoolVar(&o.trace, "trace", false, "also write a profiler trace of optimizer steps 2 to 5")
	cmd.Flags().BoolVar(&o.noAnalyze, "no-analyze", false, "only record: list the files, analyse nothing")
	_ = cmd.MarkFlagDirname("output")
	_ = cmd.RegisterFlagCompletionFunc("stacks", cobra.FixedCompletions([]string{"python", "all"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// runRecord runs the command with the hook, then reports what was recorded.
// Its error carries the command's exit status.
func runRecord(g *globals, o recordOptions, args []string, stdin io.Reader, stdout io.Writer) error {
	if o.dir == "" {
		o.dir = "torchmem-" + time.Now().Format("20060102-150405")
	}
	dir, err := openRecordDir(o.dir)
	if err != nil {
		return err
	}
	defer dir.close()
	state, err := os.MkdirTemp("", "torchmem-hook-")
	if err != nil {
		return &exitError{exitInput, fmt.Errorf("record: %w", err)}
	}
	defer os.RemoveAll(state)
	if err := os.WriteFile(filepath.Join(state, "sitecustomize.py"), recordHook, 0o644); err != nil {
		return &exitError{exitInput, fmt.Errorf("record: %w", err)}
	}

	env := recordEnv(os.Environ(), state, dir.path, o)
	exit, err := runChild(args, env, stdin, stdout, g.stderr, state)
	if err != nil {
		return err
	}
	reportRecording(g, o, dir, readHookStatus(state), exit)
	if exit.code == exitOK {
		return nil
	}
	return &exitError{code: exit.code} // the command's status, no message
}

// recordEnv is the command's environment: the hook's folder first on
// PYTHONPATH (the user's entries kept after it) and the hook's settings.
func recordEnv(environ []string, state, dir string, o recordOptions) []string {
	var env []string
	pythonpath := state
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "PYTHONPATH":
			if v != "" {
				pythonpath = state + string(os.PathListSeparator) + v
			}
		case strings.HasPrefix(k, "TORCHMEM_RECORD_"):
		default:
			env = append(env, kv)
		}
	}
	trace := "0"
	if o.trace {
		trace = "1"
	}
	return append(env,
		"PYTHONPATH="+pythonpath,
		"TORCHMEM_RECORD_STATE="+state,
		"TORCHMEM_RECORD_DIR="+dir,
		"TORCHMEM_RECORD_MAX_ENTRIES="+strconv.Itoa(o.maxEntries),
		"TORCHMEM_RECORD_STACKS="+o.stacks,
		"TORCHMEM_RECORD_TRACE="+trace,
	)
}
