package rollup

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

func TestProcessOf(t *testing.T) {
	tests := []struct {
		path string
		want Process
		ok   bool
	}{
		{"run/oom_snapshot_rank3_4242.pickle", Process{3, 4242, KindOOMSnapshot}, true},
		{"snapshot_rank0_590.pickle", Process{0, 590, KindSnapshot}, true},
		{"snapshot_rank12_7.pickle.gz", Process{12, 7, KindSnapshot}, true},
		{"a/b/trace_rank1_683.json.gz", Process{1, 683, KindTrace}, true},
		{"oom_snapshot_rank3.pickle", Process{}, false},      // no pid: a script's own name
		{"my_snapshot_rank3_42.pickle", Process{}, false},    // not record's name
		{"snapshot_rank3_42.pickle.bak", Process{}, false},   // not record's name
		{"snapshot_rank9999999_42.pickle", Process{}, false}, // no rank
	}
	for _, tc := range tests {
		got, ok := ProcessOf(tc.path)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ProcessOf(%q) = %+v, %v; want %+v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

// analyzeRecorded analyses the files of a folder that torchmem record wrote
// (../shared/recorded/<sub>), in name order.
func analyzeRecorded(t *testing.T, sub string) []*result.Result {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(st.SharedDir(t, filepath.Join("recorded", sub)), "*"))
	var out []*result.Result
	for _, f := range files {
		s, err := load.Open(f, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, analysis.Analyze(s, analysis.DefaultOptions()))
	}
	return out
}

// rowGist is what TestRecordFoldersAreOneRun compares of a row.
type rowGist struct {
	Rank, Pid, Input int
	Peak             int64
	OOM              int64 // its request, 0 without
	Also             string
}

func gists(ru *Rollup) []rowGist {
	var out []rowGist
	for _, r := range ru.Ranks {
		g := rowGist{Rank: r.Rank, Pid: r.Pid, Input: r.Input, Peak: r.PeakBytes}
		if r.OOM != nil {
			g.OOM = r.OOM.RequestedBytes
		}
		for _, f := range r.SameProcess {
			g.Also += fmt.Sprintf("[%d %s %s %d]", f.Input, filepath.Base(f.Path), f.What, f.AllocatedBytes)
		}
		out = append(out, g)
	}
	return out
}

// TestRecordFoldersAreOneRun: the folders torchmem record wrote on a GPU
// roll up as one rank per process, whatever order their files come in:
// the two DDP ranks with rank 1 the worst, 1.5477× rank 0's peak; the OOM
// run as one rank, its OOM snapshot, with its exit snapshot listed after
// the OOM; the trace run as its snapshot with the trace beside it.
// Figures from testdata/facts/rollup_facts.py.
func TestRecordFoldersAreOneRun(t *testing.T) {
	tests := []struct {
		sub       string
		rows      []rowGist
		worst     int
		imbalance float64
		firstOOM  int64 // its time, 0 without
	}{
		{"record_ddp", []rowGist{{0, 682, 0, 1041482752, 0, ""}, {1, 683, 1, 1611940864, 0, ""}}, 1, 1.5477, 0},
		{"record_oom", []rowGist{{0, 590, 0, 4632061440, 2147483648, "[1 snapshot_rank0_590.pickle after_oom 4363616768]"}}, 0, 1, 1795745622572469},
		{"record_trace", []rowGist{{0, 824, 0, 1779659776, 0, "[1 trace_rank0_824.json.gz trace 739525120]"}}, 0, 1, 0},
	}
	for _, tc := range tests {
		results := analyzeRecorded(t, tc.sub)
		for _, order := range []string{"name order", "reversed"} {
			t.Run(tc.sub+" "+order, func(t *testing.T) {
				b := NewBuilder()
				in := slices.Clone(results)
				want := slices.Clone(tc.rows)
				if order == "reversed" {
					slices.Reverse(in)
					for i := range want { // inputs are numbered as added
						want[i].Input = len(in) - 1 - want[i].Input
						want[i].Also = reverseInputs(want[i].Also, len(in))
					}
				}
				for _, r := range in {
					b.Add(r)
				}
				ru := b.Rollup()
				if got := gists(ru); !slices.Equal(got, want) {
					t.Errorf("rows\n got %+v\nwant %+v", got, want)
				}
				if ru.Inputs != len(results) || ru.Worst == nil || ru.Worst.Rank != tc.worst || ru.Imbalance != tc.imbalance {
					t.Errorf("%d inputs, worst %+v, imbalance %v; want %d, rank %d, %v", ru.Inputs, ru.Worst, ru.Imbalance, len(results), tc.worst, tc.imbalance)
				}
				if f := ru.FirstOOM; tc.firstOOM == 0 && f != nil || tc.firstOOM != 0 && (f == nil || f.TimeUS != tc.firstOOM || f.By != "time" || ru.OOMs != 1) {
					t.Errorf("%d OOMs, first %+v; want one at %d", ru.OOMs, f, tc.firstOOM)
				}
				if len(ru.Notes) != 0 {
					t.Errorf("notes %q; want none (no rank twice)", ru.Notes)
				}
			})
		}
	}
}

// reverseInputs renumbers the inputs of a gist's Also for reversed inputs
// (one file beside the row's at most, in these folders).
func reverseInputs(also string, n int) string {
	if also == "" {
		return ""
	}
	var in int
	var rest string
	fmt.Sscanf(also, "[%d %s", &in, &rest)
	return fmt.Sprintf("[%d", n-1-in) + also[len(fmt.Sprint(in))+1:]
}

// TestSameProcessFiles: of a process's files, in any order, the OOM
// snapshot is the row, then the snapshot, then a trace; an exit snapshot
// is "after the OOM" only when its history holds that OOM; processes of one
// rank with different pids (a restarted worker) are two rows, and said so.
func TestSameProcessFiles(t *testing.T) {
	const m = 1 << 20
	oom := func(r *result.Result, timeUS int64) *result.Result {
		r.Devices[0].OOM = &result.OOM{RequestedBytes: 64 * m, TimeUS: timeUS, Phase: result.PhaseForward}
		return r
	}
	atEnd := func(r *result.Result, b int64) *result.Result {
		r.Devices[0].AtEnd.AllocatedBytes = b
		return r
	}
	files := map[string]func() *result.Result{
		"oom":       func() *result.Result { return oom(madeUp("run/oom_snapshot_rank2_77.pickle", 900*m), 5e15) },
		"after":     func() *result.Result { return atEnd(oom(madeUp("run/snapshot_rank2_77.pickle", 900*m), 5e15), 300*m) },
		"before":    func() *result.Result { return atEnd(madeUp("run/snapshot_rank2_77.pickle", 800*m), 700*m) },
		"trace":     func() *result.Result { return madeUp("run/trace_rank2_77.json.gz", 500*m) },
		"other pid": func() *result.Result { return madeUp("run/snapshot_rank2_78.pickle", 600*m) },
		"rank 1":    func() *result.Result { return madeUp("run/snapshot_rank1_76.pickle", 700*m) },
	}
	tests := []struct {
		name  string
		files []string
		rows  []string // rank pid path [input what allocated]…
		notes int
	}{
		{"OOM first", []string{"oom", "after", "trace"}, []string{"2 77 run/oom_snapshot_rank2_77.pickle [1 after_oom 314572800][2 trace 0]"}, 0},
		{"trace first", []string{"trace", "after", "oom"}, []string{"2 77 run/oom_snapshot_rank2_77.pickle [0 trace 0][1 after_oom 314572800]"}, 0},
		{"snapshot first", []string{"after", "oom", "trace"}, []string{"2 77 run/oom_snapshot_rank2_77.pickle [0 after_oom 314572800][2 trace 0]"}, 0},
		{"snapshot before the OOM", []string{"before", "oom"}, []string{"2 77 run/oom_snapshot_rank2_77.pickle [0 snapshot 734003200]"}, 0},
		{"snapshot and trace", []string{"trace", "before"}, []string{"2 77 run/snapshot_rank2_77.pickle [0 trace 0]"}, 0},
		{"restarted worker", []string{"other pid", "oom", "rank 1", "after"}, []string{
			"1 76 run/snapshot_rank1_76.pickle ",
			"2 78 run/snapshot_rank2_78.pickle ",
			"2 77 run/oom_snapshot_rank2_77.pickle [3 after_oom 314572800]",
		}, 1},
		{"one file twice", []string{"oom", "oom"}, []string{"2 77 run/oom_snapshot_rank2_77.pickle ", "2 77 run/oom_snapshot_rank2_77.pickle "}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder()
			for _, f := range tc.files {
				b.Add(files[f]())
			}
			ru := b.Rollup()
			var got []string
			for _, r := range ru.Ranks {
				s := fmt.Sprintf("%d %d %s ", r.Rank, r.Pid, r.Path)
				for _, f := range r.SameProcess {
					s += fmt.Sprintf("[%d %s %d]", f.Input, f.What, f.AllocatedBytes)
				}
				got = append(got, s)
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.rows))
			if !slices.Equal(got, want) {
				t.Errorf("rows\n got %q\nwant %q", got, want)
			}
			if len(ru.Notes) != tc.notes {
				t.Errorf("notes %q; want %d", ru.Notes, tc.notes)
			}
			if len(ru.Ranks) == 1 && ru.Worst.Path != ru.Ranks[0].Path {
				t.Errorf("worst %+v is not the row's file", ru.Worst)
			}
		})
	}
}
