package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/analysis/estimate"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/report"
	"github.com/torchmem/torchmem/result"
)

func newAnalyzeCmd(g *globals) *cobra.Command {
	var format, ranks, gpu string
	var device, top int
	var strict bool
	cmd := &cobra.Command{
		Use:   "analyze FILE|FOLDER...",
		Short: "Explain what filled GPU memory, in which phase, and what to change",
		Long: `analyze replays the allocator history of a snapshot or trace and reports,
per device: the peak and its phase, memory by category (parameter, gradient,
optimizer_state, activation, temporary, autograd_detail, input, unknown) at
the peak, at the end and at an OOM, the OOM post-mortem (request, free bytes,
site, fragmentation), top allocation sites, leaks, and ranked suggestions
with the bytes each would save. Diagnostics say how far to trust the numbers.
A what-if projects the measured run: its peak under each suggestion and their
best combination (fitting --gpu, or the file's device capacity), and how the
peak scales with the batch size and the sequence length (activations linear
in both, attention quadratic in the sequence).

--format json writes schema torchmem.analysis/v1 (exact bytes); markdown is
for a bug ticket; text is for a terminal.

Several inputs (files, or folders: every snapshot and trace below them, gzip
or not, found by content) are the ranks of one job: they are analysed in
parallel, one per core, and rolled up — a table of ranks (rank from a
trace's distributedInfo, else rank3, rank-3, rank_3 or _3.pickle in the file
name, else the order) with each one's peak, phase and step, largest
category, OOM and leaks; the worst rank; the imbalance (largest peak over
the median peak of the others); the ranks that stand out and by how much; the first OOM (by
time when the files share a clock, else the lowest rank); the sites most
ranks share. Then the worst rank and the first OOM in full (--rank for
others). --format json writes schema torchmem.rollup/v1:
{"inputs": [each an analysis], "rollup": {…}}; 'torchmem merge' builds the
same roll-up from such JSON files.

The files torchmem record wrote for one process (oom_snapshot_rank{R}_{pid},
snapshot_rank{R}_{pid}, trace_rank{R}_{pid}) are one rank: its OOM snapshot,
else its snapshot, else its trace, with the others listed beside it. An
input that cannot be read is listed in the roll-up with its reason and the
others are rolled up: exit status 3 (2 when none could be read; --strict
stops at the first).`,
		Example: `  torchmem analyze oom_snapshot.pickle
  torchmem analyze --format markdown oom_snapshot.pickle > ticket.md
  torchmem analyze --format json --device 1 trace.json.gz > base.json
  torchmem analyze oom_snapshot_rank*.pickle
  torchmem analyze --format json run42/ > run42-rollup.json`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: inputCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			write, err := lookupFormat(report.Analyses, format)
			if err != nil {
				return err
			}
			if top < 1 {
				return &exitError{exitInput, fmt.Errorf("--top %d: want at least 1", top)}
			}
			opts := analysis.DefaultOptions()
			opts.Device, opts.TopSites = device, top
			if err := gpuOption(gpu, &opts); err != nil {
				return err
			}
			textTop := 5 // the first screen; --top asks for more (or fewer)
			if cmd.Flags().Changed("top") {
				textTop = top
			}
			paths, err := expandInputs(args, load.LooksLikeInput, "snapshot or trace")
			if err != nil {
				return err
			}
			if len(paths) > 1 {
				opts.NoTimeline = true
				out, err := newRollupOutput(cmd.OutOrStdout(), format, ranks, textTop)
				if err != nil {
					return err
				}
				out.strict = strict
				if err := g.analyzeAll(paths, opts, out.add, out.fail); err != nil {
					return err
				}
				if err := out.finish(g.stderr); err != nil {
					return err
				}
				return out.status(g.stderr)
			}
			var results []*result.Result
			for _, path := range paths {
				s, err := g.open(path)
				if err != nil {
					return err
				}
				if device >= 0 && s.Device(device) == nil {
					return &exitError{exitInput, fmt.Errorf("%s: no device %d in this file", path, device)}
				}
				results = append(results, g.budget.fit(g.analyze(s, opts)))
			}
			return write.Write(cmd.OutOrStdout(), results, report.Options{Top: textTop})
		},
	}
	formatFlag(cmd, &format, report.Analyses.Names())
	cmd.Flags().IntVarP(&device, "device", "d", -1, "analyse only this device (default: all)")
	cmd.Flags().IntVar(&top, "top", 10, "how many allocation sites to list (text shows 5 unless given)")
	rankFlag(cmd, &ranks)
	strictFlag(cmd, &strict)
	gpuFlag(cmd, &gpu)
	return cmd
}

// gpuFlag adds --gpu, the device the what-if projections must fit.
func gpuFlag(cmd *cobra.Command, target *string) {
	cmd.Flags().StringVar(target, "gpu", "", "GPU the what-if projections must fit: a size (24GiB) or a name (A100-80GB)")
	_ = cmd.RegisterFlagCompletionFunc("gpu", cobra.FixedCompletions(estimate.GPUNames(), cobra.ShellCompDirectiveNoFileComp))
}

// gpuOption reads --gpu into the analysis options.
func gpuOption(gpu string, opts *analysis.Options) error {
	if gpu == "" {
		return nil
	}
	g, err := estimate.ParseGPU(gpu)
	if err != nil {
		return &exitError{exitInput, fmt.Errorf("--gpu %v", err)}
	}
	opts.CapacityBytes = g.CapacityBytes
	return nil
}
