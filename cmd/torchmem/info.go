package main

import (
	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/report"
	"github.com/torchmem/torchmem/snapshot"
)

func newInfoCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "info FILE...",
		Short: "Show what a snapshot or trace holds, fast",
		Long: `info shows what a memory snapshot or profiler trace holds: format and
generation, devices, segments with reserved / allocated / active bytes, trace
entries by action, time span, annotations, allocator settings, OOM entries,
how it was recorded, and what limits trust in it.

FILE may be a pickle (any protocol), a bare segment list, a trace_plot HTML
page, a chrome trace (.json), any of them gzip-compressed, or - for stdin.`,
		Example: `  torchmem info oom_snapshot.pickle
  torchmem info --format json snapshot.pickle.gz
  torchmem info rank0.pickle rank1.pickle`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: inputCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			write, err := lookupFormat(report.Infos, format)
			if err != nil {
				return err
			}
			var sums []snapshot.Summary
			for _, path := range args {
				s, err := g.open(path)
				if err != nil {
					return err
				}
				sums = append(sums, snapshot.Summarize(s))
				g.endProgress()
			}
			return write.Write(cmd.OutOrStdout(), sums, report.Options{})
		},
	}
	formatFlag(cmd, &format, report.Infos.Names())
	return cmd
}
