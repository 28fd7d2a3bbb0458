package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/report"
	"gopkg.in/yaml.v3"
)

// checkConfig is the --config file of torchmem check.
type checkConfig struct {
	// Budgets maps a budget key to its limit ("20GiB", 0).
	Budgets map[string]string `yaml:"budgets"`
	// Baseline is relative to the config file's folder.
	Baseline  string  `yaml:"baseline"`
	Tolerance *string `yaml:"tolerance"`
	Device    *int    `yaml:"device"`
}

// readCheckConfig reads a YAML config; unknown keys are errors.
func readCheckConfig(path string) (*checkConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &exitError{exitInput, fmt.Errorf("--config: %w", err)}
	}
	var c checkConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, &exitError{exitInput, fmt.Errorf("--config %s: %s", path, strings.ReplaceAll(err.Error(), "\n", "; "))}
	}
	if c.Baseline != "" && !filepath.IsAbs(c.Baseline) {
		c.Baseline = filepath.Join(filepath.Dir(path), c.Baseline)
	}
	return &c, nil
}

func newCheckCmd(g *globals) *cobra.Command {
	var (
		format, baseline, tolerance, config, junit string
		budgets                                    []string
		device                                     int
		github                                     bool
	)
	cmd := &cobra.Command{
		Use:   "check FILE...",
		Short: "Fail a CI build when memory is over budget or grew against a baseline",
		Long: `check verifies each FILE (a snapshot, a trace, or JSON from
'torchmem analyze --format json') against budgets and a baseline, per device.

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

--baseline is an earlier analysis (JSON of torchmem analyze, or a snapshot):
the peak, every category at the peak and every phase's peak may not grow by
more than --tolerance (5% or 5: percent of the baseline; 256MiB: absolute;
default 0: any growth fails).

--config reads the same from YAML (flags win; the baseline path is relative
to the config file):
  budgets: {peak: 20GiB, activation: 8GiB, growth_per_step: 0, "phase:forward": 12GiB}
  baseline: base.json
  tolerance: 5%
  device: 0

Exit status: 0 every check passed, 1 a check failed, 2 bad input or usage.
--junit writes JUnit XML; --github writes workflow annotations on stdout and
appends a Markdown summary to $GITHUB_STEP_SUMMARY.`,
		Example: `  torchmem check run.pickle --budget peak=20GiB --budget activation=8GiB
  torchmem analyze --format json main.pickle > base.json
  torchmem check pr.pickle --baseline base.json --tolerance 5% --github
  torchmem check --config torchmem.yaml --junit torchmem.xml rank0.pickle rank1.pickle`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: inputCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "text", "markdown", "json"); err != nil {
				return err
			}
			opts := analysis.CheckOptions{Device: device}
			byKey := map[string]analysis.Budget{}
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
					b, err := analysis.NewBudget(k, c.Budgets[k])
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
				if !cmd.Flags().Changed("device") && c.Device != nil {
					opts.Device = *c.Device
				}
			}
			for _, s := range budgets {
				b, err := analysis.ParseBudget(s)
				if err != nil {
					return &exitError{exitInput, fmt.Errorf("--budget: %w", err)}
				}
				byKey[b.Key] = b
			}
			for _, b := range byKey {
				opts.Budgets = append(opts.Budgets, b)
			}
			if tolerance != "" {
				t, err := analysis.ParseTolerance(tolerance)
				if err != nil {
					return &exitError{exitInput, fmt.Errorf("--tolerance: %w", err)}
				}
				opts.Tolerance = t
			}
			if len(opts.Budgets) == 0 && baseline == "" {
				return &exitError{exitInput, errors.New("nothing to check: give --budget, --baseline or --config")}
			}
			aopts := analysis.DefaultOptions()
			aopts.NoTimeline = true
			if baseline != "" {
				b, err := g.loadResult(baseline, aopts)
				if err != nil {
					return err
				}
				opts.Baseline, opts.BaselinePath = b, baseline
			}
			var results []*analysis.CheckResult
			for _, path := range args {
				r, err := g.loadResult(path, aopts)
				if err != nil {
					return err
				}
				cr, err := analysis.Check(r, opts)
				if err != nil {
					return &exitError{exitInput, err}
				}
				results = append(results, cr)
			}
			return writeChecks(cmd.OutOrStdout(), format, junit, github, results)
		},
	}
	formatFlag(cmd, &format, "text", "text", "markdown", "json")
	cmd.Flags().StringArrayVarP(&budgets, "budget", "b", nil, "an upper bound KEY=VALUE, e.g. peak=20GiB (repeatable; see above for keys)")
	cmd.Flags().StringVar(&baseline, "baseline", "", "fail when memory grew against this analysis (torchmem analyze --format json)")
	cmd.Flags().StringVar(&tolerance, "tolerance", "", "allowed growth over the baseline: 5% or 256MiB (default 0)")
	cmd.Flags().StringVar(&config, "config", "", "read budgets, baseline, tolerance and device from this YAML file")
	cmd.Flags().IntVarP(&device, "device", "d", -1, "check only this device (default: all)")
	cmd.Flags().StringVar(&junit, "junit", "", "also write JUnit XML to this file")
	cmd.Flags().BoolVar(&github, "github", false, "also write GitHub Actions annotations, and a summary to $GITHUB_STEP_SUMMARY")
	_ = cmd.MarkFlagFilename("baseline", "json", "pickle", "pkl", "gz")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
	_ = cmd.MarkFlagFilename("junit", "xml")
	return cmd
}

// writeChecks writes the report and the CI outputs, and returns the exit
// error when a check failed.
func writeChecks(out io.Writer, format, junit string, github bool, results []*analysis.CheckResult) error {
	// The JUnit file first: a path that cannot be written is bad usage,
	// reported before anything goes to stdout.
	if junit != "" {
		var b bytes.Buffer
		if err := report.JUnit(&b, results); err != nil {
			return err
		}
		if err := os.WriteFile(junit, b.Bytes(), 0o644); err != nil {
			return &exitError{exitInput, fmt.Errorf("--junit: %w", err)}
		}
	}
	var err error
	switch format {
	case "json":
		err = report.CheckJSON(out, results)
	case "markdown":
		err = report.CheckMarkdown(out, results)
	default:
		err = report.CheckText(out, results)
	}
	if err != nil {
		return err
	}
	if github {
		if err := report.GitHubAnnotations(out, results); err != nil {
			return err
		}
		if path := os.Getenv("GITHUB_STEP_SUMMARY"); path != "" {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return &exitError{exitInput, fmt.Errorf("GITHUB_STEP_SUMMARY: %w", err)}
			}
			werr := report.CheckMarkdown(f, results)
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				return &exitError{exitInput, fmt.Errorf("GITHUB_STEP_SUMMARY: %w", werr)}
			}
		}
	}
	failed, total := 0, 0
	for _, r := range results {
		failed += r.Failed
		total += len(r.Checks)
	}
	if failed > 0 {
		return &exitError{exitFailed, fmt.Errorf("check failed: %d of %s failed", failed, report.Count(total)+" checks")}
	}
	return nil
}
