package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/report"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/rollup"
	"github.com/torchmem/torchmem/snapshot"
)

// isSummary says whether a file found in a folder is torchmem's JSON that
// merge reads: an analysis or a roll-up.
func isSummary(head []byte) bool {
	s := result.JSONSchema(head)
	return s == result.SchemaID || s == rollup.SchemaID
}

func newMergeCmd(g *globals) *cobra.Command {
	var format, out, ranks string
	var top int
	var strict bool
	cmd := &cobra.Command{
		Use:   "merge SUMMARY|FOLDER|-...",
		Short: "Roll up the JSON analyses of many ranks without their snapshots",
		Long: `merge builds the roll-up of the ranks of one job from their JSON summaries
(torchmem analyze --format json, run where each rank's snapshot or trace is:
in the training job after the dump, or as one task per rank of a batch
system), so that thousands of ranks never move their files. It is the
roll-up 'torchmem analyze' gives when it analyses the files together: the
table of ranks, the worst rank, the imbalance, the ranks that stand out,
the first OOM and the sites most ranks share.

Inputs are JSON files (gzip or not), folders (every torchmem JSON file below
them, found by content), or - for a stream of concatenated JSON documents on
standard input. Roll-ups (schema torchmem.rollup/v1) are read for their
inputs, so roll-ups merge too. Each summary may take at most
--max-input-bytes. Summaries are read one at a time and only the roll-up's
rows are kept: --format json writes each input back out as it is read.
A summary that cannot be read (or holds no analysis: [], a roll-up without
inputs) is listed in the roll-up with its reason and the others are rolled
up: exit status 3 (2 when none could be read; --strict stops at the first).`,
		Example: `  # in each rank's job, after the dump:
  torchmem analyze --format json oom_snapshot_rank$RANK.pickle > summaries/rank$RANK.json
  # anywhere, later:
  torchmem merge summaries/
  torchmem merge --format html -o job.html summaries/
  cat summaries/*.json | torchmem merge --format json - > rollup.json`,
		Args: cobra.MinimumNArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return []cobra.Completion{"json", "gz"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := lookupFormat(report.Rollups, format); err != nil {
				return err
			}
			sopts, err := g.options()
			if err != nil {
				return err
			}
			limit := sopts.MaxInputBytes
			if limit <= 0 {
				limit = snapshot.DefaultMaxInputBytes
			}
			paths, err := expandInputs(args, isSummary, "torchmem JSON (torchmem analyze --format json)")
			if err != nil {
				return err
			}
			if err := refuseOverwritingInput("-o", out, paths); err != nil {
				return err
			}
			var page bytes.Buffer
			w := cmd.OutOrStdout()
			if out != "-" {
				w = budgetWriter{&page, g.budget} // written whole, once complete
			}
			textTop := 5
			if cmd.Flags().Changed("top") {
				if top < 1 {
					return &exitError{exitInput, fmt.Errorf("--top %d: want at least 1", top)}
				}
				textTop = top
			}
			ro, err := newRollupOutput(w, format, ranks, textTop)
			if err != nil {
				return err
			}
			ro.strict = strict
			for _, path := range paths {
				if err := g.readSummaries(path, limit, func(r *result.Result) error { return ro.add(g.budget.fit(r)) }, ro.b.AddUnreadable); err != nil {
					if err := ro.fail(path, err); err != nil {
						return err
					}
				}
			}
			if err := ro.finish(g.stderr); err != nil {
				return err
			}
			if out == "-" {
				return ro.status(g.stderr)
			}
			if err := writeFileAtomic(out, page.Bytes()); err != nil {
				var pe *os.PathError
				if errors.As(err, &pe) {
					err = pe.Err
				}
				return &exitError{exitInput, fmt.Errorf("-o %s: %w", out, err)}
			}
			fmt.Fprintf(g.stderr, "wrote %s (%s)\n", out, units.FormatBytes(int64(page.Len())))
			return ro.status(g.stderr)
		},
	}
	formatFlag(cmd, &format, report.Rollups.Names())
	cmd.Flags().StringVarP(&out, "output", "o", "-", "the file to write (- for stdout)")
	rankFlag(cmd, &ranks)
	strictFlag(cmd, &strict)
	cmd.Flags().IntVar(&top, "top", 5, "how many allocation sites text lists for a rank shown in full (at most what the summaries hold)")
	return cmd
}

// rankFlag adds --rank: the ranks a roll-up shows in full in text and Markdown.
func rankFlag(cmd *cobra.Command, ranks *string) {
	cmd.Flags().StringVar(ranks, "rank", "", "with several inputs: also show these ranks in full after the roll-up, e.g. 0,3,7, or all (default: the worst and the first OOM)")
}

// strictFlag adds --strict: an input that cannot be read ends the run.
func strictFlag(cmd *cobra.Command, strict *bool) {
	cmd.Flags().BoolVar(strict, "strict", false, "with several inputs: stop at the first that cannot be read (exit 2) instead of listing it in the roll-up (exit 3)")
}

// readSummaries reads one input of merge: a file or standard input. The
// inputs a roll-up lists as unreadable go to unreadable (when not nil).
func (g *globals) readSummaries(path string, limit int64, add func(*result.Result) error, unreadable func(rollup.Unreadable)) error {
	if path == "-" {
		return rollup.ReadSummariesListing(g.stdin, "-", limit, add, unreadable)
	}
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return &snapshot.Error{Path: path, Offset: -1, Msg: err.Error()}
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return &snapshot.Error{Path: path, Offset: -1, Msg: "is a directory"}
	}
	return rollup.ReadSummariesListing(f, path, limit, add, unreadable)
}
