package rollup

import (
	"testing"

	"github.com/torchmem/torchmem/result"
)

func TestIdentify(t *testing.T) {
	dist := &result.Distributed{Rank: 5, WorldSize: 8}
	tests := []struct {
		path  string
		dist  *result.Distributed
		order int
		rank  int
		from  RankSource
	}{
		{"trace.json.gz", dist, 0, 5, FromDistributedInfo},
		{"rank3.pickle", dist, 0, 5, FromDistributedInfo}, // the file's own word wins
		{"oom_snapshot_rank3.pickle", nil, 0, 3, FromFileName},
		{"/runs/a/rank-12.1712345678.pt.trace.json.gz", nil, 0, 12, FromFileName},
		{"RANK_7_snapshot.pickle", nil, 0, 7, FromFileName},
		{"snapshot_3.pickle", nil, 9, 3, FromFileName},
		{"trace_15.json.gz", nil, 9, 15, FromFileName},
		{"logs/rank_4/snapshot.pickle", nil, 9, 4, FromFileName},
		{`C:\runs\rank2\oom.pickle`, nil, 9, 2, FromFileName}, // a Windows path in a summary
		{"frank3.pickle", nil, 1, 1, FromOrder},               // "rank" inside a word
		{"genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle", nil, 2, 2, FromOrder},
		{"host_12345.1712345678.pt.trace.json.gz", nil, 4, 4, FromOrder}, // host_pid.timestamp: no rank
		{"snapshot_20240101123000.pickle", nil, 5, 5, FromOrder},         // a date, not a rank
		{"snapshot.pickle", nil, 6, 6, FromOrder},
		{"-", nil, 7, 7, FromOrder},
		{"", nil, 8, 8, FromOrder},
	}
	for _, tc := range tests {
		rank, from := Identify(result.Input{Path: tc.path, Distributed: tc.dist}, tc.order)
		if rank != tc.rank || from != tc.from {
			t.Errorf("Identify(%q, order %d) = %d, %s; want %d, %s", tc.path, tc.order, rank, from, tc.rank, tc.from)
		}
	}
}
