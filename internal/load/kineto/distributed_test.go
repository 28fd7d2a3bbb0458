package kineto_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/internal/load/kineto"
	"github.com/torchmem/torchmem/snapshot"
)

// TestTraceDistributedInfo: the rank, world size and backend of
// distributedInfo as the writers put it (older: backend, rank, world_size;
// newer: pg_count, pg_config and nccl_version besides), and what is not a
// rank.
func TestTraceDistributedInfo(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name, info string
		want       *snapshot.Distributed
	}{
		{"older", `{"backend": "nccl", "rank": 1, "world_size": 2}`, &snapshot.Distributed{Rank: 1, WorldSize: 2, Backend: "nccl"}},
		{"newer", `{"backend": "nccl", "rank": 7, "world_size": 8, "pg_count": 3, "pg_config": [{"pg_name": "0", "ranks": [0, 1]}], "nccl_version": "2.18.3"}`, &snapshot.Distributed{Rank: 7, WorldSize: 8, Backend: "nccl"}},
		{"rank as string", `{"rank": "3", "world_size": "4"}`, &snapshot.Distributed{Rank: 3, WorldSize: 4}},
		{"no world size", `{"backend": "gloo", "rank": 0}`, &snapshot.Distributed{Rank: 0, Backend: "gloo"}},
		{"long backend kept short", `{"backend": "` + long + `", "rank": 0}`, &snapshot.Distributed{Rank: 0, Backend: long[:kineto.MaxBackendBytes]}},
		{"no rank", `{"backend": "nccl", "world_size": 2}`, nil},
		{"negative rank", `{"rank": -1, "world_size": 2}`, nil},
		{"rank past the world", `{"rank": 2, "world_size": 2}`, nil},
		{"rank past int32", `{"rank": 4294967296}`, nil},
		{"not an object", `[1, 2]`, nil},
		{"null", `null`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			js := `{"distributedInfo": ` + tc.info + `, "traceEvents": [` + mem("10", "1", 1, 0, "1", 512, 512) + `]}`
			s := readTraceString(t, js)
			if diff := cmp.Diff(tc.want, s.Source.Distributed); diff != "" {
				t.Errorf("Distributed (-want +got):\n%s", diff)
			}
		})
	}
}
