package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/check"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/report"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/rollup"
)

func newCheckCmd(g *globals) *cobra.Command {
	var (
		format, baseline, tolerance, floor, config, junit, sourceRoot string
		budgets                                                       []string
		device                                                        int
		github, allowOOM, updateBaseline                              bool
	)
	cmd := &cobra.Command{
		Use:   "check FILE|FOLDER...",
		Short: "Fail a CI build on an OOM, memory over budget, or growth against a baseline",
		Long: `check verifies each FILE (a snapshot, a trace, or JSON from
'torchmem analyze --format json') against budgets and a baseline, per device.

The first check is whether a device ran out of memory: an OOM in FILE fails
the check, with its verdict, unless --allow-oom (then it is listed, skipped).

Budgets (--budget KEY=VALUE, repeatable; sizes like 20GiB, 512MiB, 0 — GiB is
2^30, GB 10^9):
  peak               allocated bytes at the peak
  end                allocated bytes at the end (the dump)
  <category>         a category at the peak: parameter, gradient,
                     optimizer_state, activation, temporary, autograd_detail,
                     input, unknown
  phase:<phase>      the highest peak of a phase over all steps: phase:forward,
                     phase:backward, phase:optimizer, phase:zero_grad,
                     phase:data, phase:unknown (skipped when the run has none)
  growth_per_step    the largest bytes per step of any leak finding
  leaks              how many medium/high-confidence leaks (a count)
  imbalance          the largest peak over the median peak of the other
                     devices of all FILEs (a ratio like 1.2; see analyze)

--baseline is an earlier analysis (JSON of torchmem analyze, or a snapshot),
compared like with like: the overall peak, and for every phase both runs have,
that phase's peak and each category at it, may not grow by more than
--tolerance (5% or 5: percent of the baseline, at most 1000%; 256MiB:
absolute; default 0) nor by more than --floor, the noise floor (16MiB: bytes;
1%: of the baseline's peak on the device; default 16MiB,1%: the larger of
16 MiB and 1% of the peak; 0: every byte counts). A failed check names the
allocation sites that grew most, matched as diff matches them (by their user
frame, else by file and function when the code moved to another line).
--update-baseline writes FILE's analysis to the --baseline path instead of
comparing with it (after the other checks pass).

Several FILEs (or folders: every snapshot, trace and torchmem JSON below
them) are the ranks of one job, analysed in parallel: every budget applies
to every rank. A roll-up (analyze --format json of several files, schema
torchmem.rollup/v1) may be a FILE — its inputs are checked — or the
--baseline: each rank is then compared with the same rank of the baseline
(ranks found as analyze finds them; a rank the baseline lacks is skipped).

--config reads the same from YAML (flags win; the baseline path is relative
to the config file):
  budgets: {peak: 20GiB, activation: 8GiB, growth_per_step: 0, "phase:forward": 12GiB}
  baseline: base.json
  tolerance: 5%
  floor: 16MiB,1%
  device: 0

Exit status: 0 every check passed, 1 a check failed, 2 bad input or usage.
--junit writes JUnit XML; --github writes workflow annotations on stdout and
appends a Markdown summary to $GITHUB_STEP_SUMMARY. An annotation points at
the code (file=, line=) when a site's frame is a file of the repository:
--source-root, else $GITHUB_WORKSPACE, else the git checkout around the
working directory.`,
		Example: `  torchmem check run.pickle --budget peak=20GiB --budget activation=8GiB
  torchmem analyze --format json main.pickle > base.json
  torchmem check pr.pickle --baseline base.json --tolerance 5% --github
  torchmem check main.pickle --baseline base.json --update-baseline
  torchmem check --config torchmem.yaml --junit torchmem.xml rank0.pickle rank1.pickle
  torchmem check run42/ --budget peak=70GiB --budget imbalance=1.2 --baseline main-rollup.json`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: inputCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := lookupFormat(report.Checks, format); err != nil {
				return err
			}
			opts := check.Options{Device: device}
			byKey := map[string]check.Budget{}
			var imbalance string // the imbalance budget's value, checked on the roll-up
			if config != "" {
				c, err := readCheckConfig(config)
				if err != nil {
					return err
				}
				keys := make([]string, 0, len(c.Budgets))
				for k := range c.Budgets {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					if k == check.BudgetImbalance {
						byKey[k] = check.Budget{Key: k, Limit: -1}
						imbalance = c.Budgets[k]
						continue
					}
					b, err := check.NewBudget(k, c.Budgets[k])
					if err != nil {
						return &exitError{exitInput, fmt.Errorf("--config %s: %w", config, err)}
					}
					byKey[k] = b
				}
				if baseline == "" {
					baseline = c.Baseline
				}
				if tolerance == "" && c.Tolerance != nil {
					tolerance = *c.Tolerance
				}
				if floor == "" && c.Floor != nil {
					floor = *c.Floor
				}
				if !cmd.Flags().Changed("device") && c.Device != nil {
					opts.Device = *c.Device
				}
				if !cmd.Flags().Changed("allow-oom") && c.AllowOOM != nil {
					allowOOM = *c.AllowOOM
				}
			}
			for _, s := range budgets {
				if k, v, ok := strings.Cut(s, "="); ok && strings.TrimSpace(k) == check.BudgetImbalance {
					byKey[check.BudgetImbalance] = check.Budget{Key: check.BudgetImbalance, Limit: -1}
					imbalance = v
					continue
				}
				b, err := check.ParseBudget(s)
				if err != nil {
					return &exitError{exitInput, fmt.Errorf("--budget: %w", err)}
				}
				byKey[b.Key] = b
			}
			imbalanceLimit := 0.0
			for _, b := range byKey {
				if b.Key == check.BudgetImbalance {
					l, err := check.ParseImbalance(imbalance)
					if err != nil {
						return &exitError{exitInput, fmt.Errorf("--budget: %w", err)}
					}
					imbalanceLimit = l
					continue
				}
				opts.Budgets = append(opts.Budgets, b)
			}
			if tolerance != "" {
				t, err := check.ParseTolerance(tolerance)
				if err != nil {
					return &exitError{exitInput, fmt.Errorf("--tolerance: %w", err)}
				}
				opts.Tolerance = t
			}
			opts.Floor = check.DefaultFloor
			if floor != "" {
				f, err := check.ParseFloor(floor)
				if err != nil {
					return &exitError{exitInput, fmt.Errorf("--floor: %w", err)}
				}
				opts.Floor = f
			}
			opts.AllowOOM = allowOOM
			if len(opts.Budgets) == 0 && imbalanceLimit == 0 && baseline == "" && allowOOM {
				return &exitError{exitInput, errors.New("nothing to check: with --allow-oom, give --budget, --baseline or --config")}
			}
			if updateBaseline && (baseline == "" || len(args) != 1) {
				return &exitError{exitInput, errors.New("--update-baseline: give one FILE and the --baseline path to write")}
			}
			aopts := analysis.DefaultOptions()
			// Every site a baseline keeps (README: analyze --top 1000), so
			// that failed checks can name the sites that grew.
			aopts.NoTimeline, aopts.TopSites = true, baselineTopSites
			if updateBaseline {
				return writeBaseline(g, cmd.OutOrStdout(), args[0], baseline, aopts, opts)
			}
			var bases *check.Baselines
			if baseline != "" {
				var err error
				bases, err = g.loadBaselines(baseline, aopts)
				if err != nil {
					return err
				}
				opts.BaselinePath = baseline
			}
			paths, err := expandInputs(args, isCheckInput, "snapshot, trace or torchmem JSON")
			if err != nil {
				return err
			}
			if err := refuseOverwritingInput("--junit", junit, append(paths, baseline)); err != nil {
				return err
			}
			var results []*check.Result
			b := rollup.NewBuilder()
			n := 0
			checkOne := func(r *result.Result) error {
				o := opts
				var missing string
				if bases != nil {
					o.Baseline, missing = bases.For(r, n)
				}
				n++
				cr, err := check.Check(r, o)
				if err != nil {
					return &exitError{exitInput, err}
				}
				if missing != "" {
					cr.Add(check.Item{Name: "baseline", Kind: check.CheckKindRegression, Device: -1, Status: check.CheckSkip, Message: missing})
				}
				results = append(results, cr)
				b.Add(r)
				return nil
			}
			if len(paths) == 1 && !isRollupFile(paths[0]) {
				r, err := g.loadResult(paths[0], aopts)
				if err != nil {
					return err
				}
				if err := checkOne(g.budget.fit(r)); err != nil {
					return err
				}
			} else if err := g.loadAll(paths, g.checkLoader(aopts), checkOne, nil); err != nil {
				return err
			}
			if imbalanceLimit > 0 {
				results = append(results, check.CheckImbalance(b.Rollup(), imbalanceLimit))
			}
			return writeChecks(cmd.OutOrStdout(), g.stderr, g.budget, format, junit, github, sourceRoot, results)
		},
	}
	formatFlag(cmd, &format, report.Checks.Names())
	cmd.Flags().StringArrayVarP(&budgets, "budget", "b", nil, "an upper bound KEY=VALUE, e.g. peak=20GiB (repeatable; see above for keys)")
	cmd.Flags().StringVar(&baseline, "baseline", "", "fail when memory grew against this analysis (torchmem analyze --format json)")
	cmd.Flags().StringVar(&tolerance, "tolerance", "", "allowed growth over the baseline: 5% or 256MiB (default 0)")
	cmd.Flags().StringVar(&floor, "floor", "", "growth over the baseline that is noise: 16MiB, 1% of the peak, or both (default 16MiB,1%)")
	cmd.Flags().StringVar(&config, "config", "", "read budgets, baseline, tolerance and device from this YAML file")
	cmd.Flags().IntVarP(&device, "device", "d", -1, "check only this device (default: all)")
	cmd.Flags().StringVar(&junit, "junit", "", "also write JUnit XML to this file")
	cmd.Flags().BoolVar(&github, "github", false, "also write GitHub Actions annotations, and a summary to $GITHUB_STEP_SUMMARY")
	cmd.Flags().BoolVar(&allowOOM, "allow-oom", false, "let a run that ran out of memory pass (its OOM check is skipped)")
	cmd.Flags().BoolVar(&updateBaseline, "update-baseline", false, "write FILE's analysis to the --baseline path instead of comparing")
	cmd.Flags().StringVar(&sourceRoot, "source-root", "", "the repository's root, for annotations' file= (default: $GITHUB_WORKSPACE or the git checkout)")
	_ = cmd.MarkFlagDirname("source-root")
	_ = cmd.MarkFlagFilename("baseline", "json", "pickle", "pkl", "gz")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
	_ = cmd.MarkFlagFilename("junit", "xml")
	return cmd
}

// baselineTopSites is how many allocation sites check keeps per moment
// (the peak, each phase's peak), and a baseline it writes holds.
const baselineTopSites = 1000

// writeChecks writes the report and the CI outputs, and returns the exit
// error when a check failed. A job summary that cannot be written is a
// warning on stderr: the checks' verdict decides the exit status.
func writeChecks(out, stderr io.Writer, budget *runBudget, format, junit string, github bool, sourceRoot string, results []*check.Result) error {
	// The JUnit file first: a path that cannot be written is bad usage,
	// reported before anything goes to stdout.
	if junit != "" {
		var b bytes.Buffer
		if err := report.JUnit(budgetWriter{&b, budget}, results); err != nil {
			return &exitError{exitInput, fmt.Errorf("--junit: %w", err)}
		}
		if err := os.WriteFile(junit, b.Bytes(), 0o644); err != nil {
			return &exitError{exitInput, fmt.Errorf("--junit: %w", err)}
		}
	}
	write, err := lookupFormat(report.Checks, format)
	if err != nil {
		return err
	}
	if err := write.Write(out, results, report.Options{}); err != nil {
		return err
	}
	if github {
		if err := report.GitHubAnnotations(out, results, sourceLocator(repositoryRoot(sourceRoot))); err != nil {
			return err
		}
		if path := os.Getenv("GITHUB_STEP_SUMMARY"); path != "" {
			if err := appendSummary(path, budget, results); err != nil {
				fmt.Fprintf(stderr, "torchmem: warning: GITHUB_STEP_SUMMARY: %s (the job summary is not written; the checks' verdict stands)\n",
					strings.ReplaceAll(err.Error(), "\n", " "))
			}
		}
	}
	failed, total := 0, 0
	for _, r := range results {
		failed += r.Failed
		total += len(r.Checks)
	}
	if failed > 0 {
		return &exitError{exitFailed, fmt.Errorf("check failed: %d of %s failed", failed, units.Count(total)+" checks")}
	}
	return nil
}

// appendSummary appends the checks as Markdown to the job summary file.
func appendSummary(path string, budget *runBudget, results []*check.Result) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	werr := report.CheckMarkdown(budgetWriter{f, budget}, results)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

// writeBaseline is check --update-baseline: it analyses path, runs the
// checks that need no baseline (the OOM check, budgets), and when they
// pass writes the analysis (as analyze --format json --top 1000 would) to
// the baseline path, through a temporary file. A failing run leaves the
// baseline as it was and exits 1.
func writeBaseline(g *globals, out io.Writer, path, baseline string, aopts analysis.Options, opts check.Options) error {
	r, err := g.loadResult(path, aopts)
	if err != nil {
		return err
	}
	g.budget.fit(r)
	cr, err := check.Check(r, opts)
	if err != nil {
		return &exitError{exitInput, err}
	}
	if !cr.OK() {
		if err := report.CheckText(out, []*check.Result{cr}); err != nil {
			return err
		}
		return &exitError{exitFailed, fmt.Errorf("baseline %s not updated: %d of %s failed", baseline, cr.Failed, units.Count(len(cr.Checks))+" checks")}
	}
	var b bytes.Buffer
	if err := report.JSON(budgetWriter{&b, g.budget}, []*result.Result{r}); err != nil {
		return &exitError{exitInput, fmt.Errorf("--update-baseline %s: %w", baseline, err)}
	}
	if err := writeFileAtomic(baseline, b.Bytes()); err != nil {
		return &exitError{exitInput, fmt.Errorf("--update-baseline %s: %w", baseline, err)}
	}
	_, err = fmt.Fprintf(out, "torchmem check: wrote the baseline %s from %s (%s; %s)\n", units.OneLine(baseline), units.OneLine(path),
		units.FormatBytes(int64(b.Len())), report.CheckSummary(cr))
	return err
}
