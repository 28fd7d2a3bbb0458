package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/report"
)

func newReportCmd(g *globals) *cobra.Command {
	var out, gpu string
	var strict bool
	cmd := &cobra.Command{
		Use:   "report FILE|FOLDER...",
		Short: "Write a self-contained HTML report to open in a browser or attach to a ticket",
		Long: `report analyses a snapshot or trace and writes one HTML file: the verdict
first (what filled memory, why the OOM happened), then a zoomable timeline of
allocated memory by category with reserved memory, phases, steps and the OOM
marked; memory by category at the peak, the OOM and the end; top allocation
sites; free blocks against the failed request; leaks, suggestions with their
savings, and what limits trust in the numbers. Files with several devices get
a device selector.

The page is self-contained and works offline: the charting library (Apache
ECharts) is embedded and nothing is loaded from any network. It stays under
2 MB whatever the input: the timeline is thinned, keeping the highs and lows
of every stretch and the peak and the OOM exactly. Names from the input are
shown as text, never as markup.

Several inputs (files, or folders of them) are the ranks of one job: the
page shows their roll-up first (see 'torchmem analyze'): the ranks side by
side — a ranks×time heat map of allocated memory and each rank's peak by
category against the median — then the table of ranks, each rank's details
on demand, the ranks that stand out, the sites most ranks share. It stays
under 2 MB for any number of ranks. The files of one process of torchmem
record are one rank; an input that cannot be read is listed on the page
and the others are rolled up (exit status 3; --strict stops at the first).`,
		Example: `  torchmem report oom_snapshot.pickle -o oom.html
  torchmem report trace.json.gz -o - > trace.html
  torchmem report run42/ -o run42.html`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: inputCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := analysis.DefaultOptions()
			if err := gpuOption(gpu, &opts); err != nil {
				return err
			}
			paths, err := expandInputs(args, load.LooksLikeInput, "snapshot or trace")
			if err != nil {
				return err
			}
			if err := refuseOverwritingInput("-o", out, paths); err != nil {
				return err
			}
			var page bytes.Buffer
			var partial *rollupOutput // a roll-up, whose status ends the run
			if len(paths) > 1 {
				opts.NoTimeline = true
				ro, err := newRollupOutput(&page, string(report.FormatHTML), "", 5)
				if err != nil {
					return err
				}
				ro.strict = strict
				if err := g.analyzeAll(paths, opts, ro.add, ro.fail); err != nil {
					return err
				}
				if err := ro.finish(g.stderr); err != nil {
					return err
				}
				partial = ro
			} else {
				s, err := g.open(paths[0])
				if err != nil {
					return err
				}
				r := g.budget.fit(g.analyze(s, opts))
				if err := report.HTML(&page, r, report.HTMLOptions{Version: version}); err != nil {
					return err
				}
			}
			if out == "-" {
				if _, err := cmd.OutOrStdout().Write(page.Bytes()); err != nil {
					return err
				}
				return partial.status(g.stderr)
			}
			if err := g.budget.charge(page.Len()); err != nil {
				return &exitError{exitInput, fmt.Errorf("-o %s: %w", out, err)}
			}
			if err := writeFileAtomic(out, page.Bytes()); err != nil {
				var pe *os.PathError
				if errors.As(err, &pe) {
					err = pe.Err // the temporary file's name means nothing to the user
				}
				return &exitError{exitInput, fmt.Errorf("-o %s: %w", out, err)}
			}
			if !g.quiet {
				fmt.Fprintf(g.stderr, "wrote %s (%s)\n", out, units.FormatBytes(int64(page.Len())))
			}
			return partial.status(g.stderr)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "report.html", "the HTML file to write (- for stdout)")
	_ = cmd.MarkFlagFilename("output", "html")
	strictFlag(cmd, &strict)
	gpuFlag(cmd, &gpu)
	return cmd
}
