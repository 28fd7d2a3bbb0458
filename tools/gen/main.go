// Command gen writes inputs of torchmem's own, made by the allocator
// simulator of internal/snapshottest: the demo snapshot the repository
// ships and large files for benchmarks. It is a developer tool, apart from
// the torchmem binary, which links no test scaffolding:
//
//	go run ./tools/gen demo -o testdata/demo/oom_snapshot.pickle
//	go run ./tools/gen big --size 1GB -o /tmp/big.pickle
//	go run ./tools/gen bigtrace --size 1GB -o /tmp/big.json
//	go run ./tools/gen training --size 1GB -o /tmp/train.pickle  # a training step repeated
//	go run ./tools/gen dense --size 170MB -o /tmp/dense.pickle   # the same, frames lists shared
//	go run ./tools/gen faultyjob -o /tmp/job  # 8 ranks' snapshots, oom_snapshot_rankN.pickle
//
// Sizes are read as every torchmem flag reads them (units.ParseBytes).
// A bad argument is one line on stderr and exit status 2.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/internal/units"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// errUsage is a bad command line (exit 2), as opposed to a failed write (1).
type errUsage struct{ error }

// run is the command: the scenario and flags in args (flags before or
// after the scenario), the file on stdout unless -o; its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	err := gen(args, stdout, stderr)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "gen: %s\n", units.OneLine(err.Error()))
	if errors.As(err, new(errUsage)) {
		return 2
	}
	return 1
}

func gen(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("o", "", "file to write (default stdout); for faultyjob, a folder")
	size := fs.String("size", "100MB", "approximate size of a big, bigtrace, training or dense file")
	protocol := fs.Int("protocol", 4, "pickle protocol (2, 4 or 5) of demo and faultyjob")
	quiet := fs.Bool("q", false, "do not say how many events were written")
	if err := fs.Parse(args); err != nil {
		return errUsage{err}
	}
	if fs.NArg() == 0 {
		return errUsage{errors.New("want a scenario: demo, big, bigtrace, training, dense or faultyjob")}
	}
	scenario := fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return errUsage{err}
	}
	if fs.NArg() > 0 {
		return errUsage{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	toStdout := *out == "" || *out == "-"
	switch scenario {
	case "big", "bigtrace", "training", "dense":
		n, err := units.ParseBytes(*size)
		if err != nil {
			return errUsage{fmt.Errorf("%s --size %q: %v", scenario, *size, err)}
		}
		w := stdout
		if !toStdout {
			f, err := os.Create(*out)
			if err != nil {
				return err
			}
			defer f.Close()
			w = f
		}
		var count int
		what := "trace entries"
		switch scenario {
		case "bigtrace":
			count, err = st.WriteBigTrace(w, n, 1)
			what = "memory events"
		case "big":
			count, err = st.WriteBig(w, st.BigConfig{TargetBytes: n, Seed: 1})
		case "training":
			count, err = st.WriteTraining(w, st.TrainingConfig{TargetBytes: n})
		default:
			count, err = st.WriteTraining(w, st.TrainingConfig{TargetBytes: n, SharedStacks: true, Gen: 'E'})
		}
		if err == nil && !*quiet {
			fmt.Fprintf(stderr, "wrote %d %s\n", count, what)
		}
		return err
	case "demo":
		data := st.Marshal(st.Train(st.DemoConfig).Snapshot(), *protocol)
		if toStdout {
			_, err := stdout.Write(data)
			return err
		}
		return os.WriteFile(*out, data, 0o644)
	case "faultyjob":
		if toStdout {
			return errUsage{errors.New("faultyjob: -o FOLDER is required")}
		}
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		for _, c := range st.FaultyJob('G') {
			s, _ := st.RankRun(c)
			p := filepath.Join(*out, fmt.Sprintf("oom_snapshot_rank%d.pickle", c.Rank))
			if err := os.WriteFile(p, st.Marshal(s.Snapshot(), *protocol), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	return errUsage{fmt.Errorf("unknown scenario %q (want demo, big, bigtrace, training, dense or faultyjob)", scenario)}
}
