package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/diff"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/report"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

func newDiffCmd(g *globals) *cobra.Command {
	var format string
	var device, top int
	cmd := &cobra.Command{
		Use:   "diff BASE NEW",
		Short: "Compare the memory of two runs: peaks, categories, phases, steps, sites, OOMs",
		Long: `diff compares two runs of related code, per device (matched by id): the peak
and the end (allocated and reserved), every category at the peak and at the
end, the highest peak of each phase, of each step (aligned by step number),
the bytes live at the peak per allocation site (the first user frame) with
new and vanished sites, an OOM in one run and not the other, and leaks.

BASE and NEW are snapshots or traces (analysed on the fly) or JSON written by
'torchmem analyze --format json'. A JSON analysis lists only the sites it was
written with (analyze --top N; write baselines with --top 1000): a site
missing from a short list may be below its cut rather than gone.
diff reports; it does not judge: it exits 0 unless an input is bad (use
'torchmem check --baseline' to fail a build on growth).`,
		Example: `  torchmem diff before.pickle after.pickle
  torchmem diff --format markdown base.json after.pickle > pr-comment.md
  torchmem diff --format json --device 0 base.json.gz new.json`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: inputCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			write, err := lookupFormat(report.Diffs, format)
			if err != nil {
				return err
			}
			if args[0] == "-" && args[1] == "-" {
				return &exitError{exitInput, fmt.Errorf("BASE and NEW cannot both be - (stdin)")}
			}
			opts := analysis.DefaultOptions()
			opts.TopSites, opts.NoTimeline = top, true
			var rs [2]*result.Result
			for i, path := range args {
				r, err := g.loadResult(path, opts)
				if err != nil {
					return err
				}
				rs[i] = g.budget.fit(r)
			}
			if device >= 0 {
				found := false
				for i, r := range rs {
					rs[i] = r.OnlyDevice(device)
					found = found || len(rs[i].Devices) > 0
				}
				if !found {
					return &exitError{exitInput, fmt.Errorf("no device %d in %s or %s", device, args[0], args[1])}
				}
			}
			d := diff.Diff(rs[0], rs[1])
			return write.Write(cmd.OutOrStdout(), d, report.Options{})
		},
	}
	formatFlag(cmd, &format, report.Diffs.Names())
	cmd.Flags().IntVarP(&device, "device", "d", -1, "compare only this device (default: all)")
	cmd.Flags().IntVar(&top, "top", 1000, "how many allocation sites of each snapshot or trace to compare")
	return cmd
}

// sniffBytes is how much of a file is read to tell an analysis JSON from a
// snapshot or trace.
const sniffBytes = 4096

// loadResult reads one input of diff or check: JSON written by torchmem
// analyze --format json (recognised by its "schema" near the start; gzip is
// fine), or a snapshot or trace, which it analyses with opts. "-" reads
// stdin.
func (g *globals) loadResult(path string, opts analysis.Options) (*result.Result, error) {
	sopts, err := g.options()
	if err != nil {
		return nil, err
	}
	var br *bufio.Reader
	if path == "-" {
		br = bufio.NewReaderSize(g.stdin, sniffBytes)
	} else {
		f, err := os.Open(path)
		if err != nil {
			// g.open words file errors the same way as every command.
			_, err = g.open(path)
			return nil, err
		}
		defer f.Close()
		br = bufio.NewReaderSize(f, sniffBytes)
	}
	// Sniff the (decompressed) start for the schema of an analysis, after
	// any amount of whitespace.
	head, _ := br.Peek(sniffBytes)
	if len(head) == sniffBytes && len(bytes.TrimLeft(head, " \t\r\n")) == 0 {
		for len(head) > 0 && len(bytes.TrimLeft(head, " \t\r\n")) == 0 {
			br.Discard(len(head))
			head, _ = br.Peek(sniffBytes)
		}
	}
	var content io.Reader = br
	if len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		if zr, err := gzip.NewReader(bytes.NewReader(head)); err == nil {
			plain, _ := io.ReadAll(io.LimitReader(zr, sniffBytes))
			if result.JSONSchema(plain) != "" {
				zr, err := gzip.NewReader(br)
				if err != nil {
					return nil, &exitError{exitInput, fmt.Errorf("%s: %v", path, err)}
				}
				content, head = zr, plain
			}
		}
	}
	if schema := result.JSONSchema(head); schema != "" {
		limit := sopts.MaxInputBytes
		if limit <= 0 {
			limit = snapshot.DefaultMaxInputBytes
		}
		res, err := result.ReadResult(content, path, schema, limit)
		if err != nil {
			return nil, &exitError{exitInput, err}
		}
		return res, nil
	}
	if path == "-" {
		sopts.Progress = g.beginProgress(path, -1)
		s, err := load.Read(br, "-", -1, sopts)
		if err != nil {
			g.endProgress()
			return nil, err
		}
		return g.analyze(s, opts), nil
	}
	s, err := g.open(path)
	if err != nil {
		return nil, err
	}
	return g.analyze(s, opts), nil
}
