package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	st "github.com/torchmem/torchmem/snapshot/snapshottest"
)

// newGenCmd makes inputs of the project's own: the demo snapshot and large
// files for benchmarks. Hidden from help: it is a developer tool.
func newGenCmd(g *globals) *cobra.Command {
	var out, size string
	var protocol int
	cmd := &cobra.Command{
		Use:    "gen demo|big|bigtrace|training|dense|faultyjob",
		Short:  "Generate a snapshot made by torchmem's own allocator simulator",
		Hidden: true,
		Example: `  torchmem gen demo -o testdata/demo/oom_snapshot.pickle
  torchmem gen big --size 1GB -o /tmp/big.pickle
  torchmem gen bigtrace --size 1GB -o /tmp/big.json
  torchmem gen training --size 1GB -o /tmp/train.pickle   # a training step repeated
  torchmem gen dense --size 170MB -o /tmp/dense.pickle    # the same, frames lists shared
  torchmem gen faultyjob -o /tmp/job   # 8 ranks' snapshots, oom_snapshot_rankN.pickle`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var data []byte
			switch args[0] {
			case "big", "bigtrace", "training", "dense":
				n, err := humanize.ParseBytes(size)
				if err != nil {
					return &exitError{exitInput, fmt.Errorf("gen big --size %q: %v", size, err)}
				}
				w := cmd.OutOrStdout()
				if out != "" && out != "-" {
					f, err := os.Create(out)
					if err != nil {
						return err
					}
					defer f.Close()
					w = f
				}
				if args[0] == "bigtrace" {
					events, err := st.WriteBigTrace(w, int64(n), 1)
					if err == nil && !g.quiet {
						fmt.Fprintf(g.stderr, "wrote %d memory events\n", events)
					}
					return err
				}
				var entries int
				switch args[0] {
				case "big":
					entries, err = st.WriteBig(w, st.BigConfig{TargetBytes: int64(n), Seed: 1})
				case "training":
					entries, err = st.WriteTraining(w, st.TrainingConfig{TargetBytes: int64(n)})
				default:
					entries, err = st.WriteTraining(w, st.TrainingConfig{TargetBytes: int64(n), SharedStacks: true, Gen: 'E'})
				}
				if err == nil && !g.quiet {
					fmt.Fprintf(g.stderr, "wrote %d trace entries\n", entries)
				}
				return err
			case "demo":
				data = st.Marshal(st.Train(st.DemoConfig).Snapshot(), protocol)
			case "faultyjob":
				if out == "" || out == "-" {
					return &exitError{exitInput, fmt.Errorf("gen faultyjob: -o FOLDER is required")}
				}
				if err := os.MkdirAll(out, 0o755); err != nil {
					return err
				}
				for _, c := range st.FaultyJob('G') {
					s, _ := st.RankRun(c)
					p := filepath.Join(out, fmt.Sprintf("oom_snapshot_rank%d.pickle", c.Rank))
					if err := os.WriteFile(p, st.Marshal(s.Snapshot(), protocol), 0o644); err != nil {
						return err
					}
				}
				return nil
			default:
				return &exitError{exitInput, fmt.Errorf("gen: unknown scenario %q (want demo, big, bigtrace, training, dense or faultyjob)", args[0])}
			}
			if out == "" || out == "-" {
				_, err := cmd.OutOrStdout().Write(data)
				return err
			}
			return os.WriteFile(out, data, 0o644)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write (default stdout)")
	cmd.Flags().StringVar(&size, "size", "100MB", "approximate size of a big snapshot")
	cmd.Flags().IntVar(&protocol, "protocol", 4, "pickle protocol (2, 4 or 5)")
	return cmd
}
