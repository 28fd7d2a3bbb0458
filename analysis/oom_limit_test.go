package analysis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/internal/units"
)

// TestOOMUnderProcessLimit: an OOM with more free on the device than the
// segment the request needs was refused by the allocator itself, under a
// per-process memory fraction; the verdict says so and names the bound
// (reserved + request). With less free than that — the device was full —
// it says nothing of a limit. Requests of every segment class (2 MiB,
// 20 MiB, rounded large) and every stack shape.
func TestOOMUnderProcessLimit(t *testing.T) {
	const margin = 64 << 20
	for _, kind := range frameKinds {
		for _, tc := range []struct {
			request, free int64
			limited       bool
		}{
			{request: 2 << 30, free: 134 << 30, limited: true},
			{request: 2 << 30, free: 2<<30 + margin, limited: true},
			{request: 2 << 30, free: 2<<30 + margin - 1, limited: false},
			{request: 2 << 30, free: 252 << 20, limited: false},
			{request: 5 << 20, free: 20<<20 + margin, limited: true},    // a 20 MiB segment
			{request: 5 << 20, free: 20<<20 + margin/2, limited: false}, // no room for the segment
			{request: 4096, free: 1 << 30, limited: true},
			{request: 4096, free: 0, limited: false}, // no device_free recorded
		} {
			t.Run(fmt.Sprintf("%s, %d B requested, %d B free", kind, tc.request, tc.free), func(t *testing.T) {
				x := fx{st.NewSim(), kind}
				c := trainRun{layers: 3, hidden: 512, tokens: 1024, steps: 1, ws: 32 << 20}
				c.run(x)
				s := x.s
				fwd := x.stack(cppAddmm, []*st.Dict{s.F("torch/nn/modules/linear.py", 125, "forward")}, []*st.Dict{s.F("train.py", 21, "<module>")})
				s.Alloc(0, c.tokens*c.hidden*4, fwd)
				s.OOM(0, tc.request, tc.free, fwd)
				r := Analyze(analysistest.Read(t, s, 0), DefaultOptions())
				o := r.Devices[0].OOM
				if o == nil {
					t.Fatal("no OOM")
				}
				if got := strings.Contains(o.Verdict, "per-process limit"); got != tc.limited {
					t.Errorf("per-process limit named %v, want %v: %s", got, tc.limited, o.Verdict)
				}
				if tc.limited && !strings.Contains(o.Verdict, units.FormatBytes(o.ReservedBytes+o.RequestedBytes)) {
					t.Errorf("verdict names no bound of reserved + request: %s", o.Verdict)
				}
			})
		}
	}
}

// TestOOMUnderProcessLimitReal: rec_oom.py caps itself at 6 GiB with
// set_per_process_memory_fraction on a 141 GB H200 and fails a 2 GiB
// request with 134 GiB free; the two other real OOMs ran out of device
// memory (252 MiB and 91 MiB free).
func TestOOMUnderProcessLimitReal(t *testing.T) {
	for _, tc := range []struct {
		sub, file string
		device    int
		limited   bool
	}{
		{"recorded", "record_oom/oom_snapshot_rank0_590.pickle", 0, true},
		{"recorded", "record_oom/snapshot_rank0_590.pickle", 0, true},
		{"snapshots", "genC_torch2.2_nesta_OOM_pickle_named_json.pickle", 0, false},
		{"snapshots", "genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle", 1, false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r := Analyze(analysistest.OpenShared(t, tc.sub, tc.file), DefaultOptions())
			var verdict string
			for _, d := range r.Devices {
				if d.Device == tc.device && d.OOM != nil {
					verdict = d.OOM.Verdict
				}
			}
			if got := strings.Contains(verdict, "per-process limit"); got != tc.limited {
				t.Errorf("per-process limit named %v, want %v: %q", got, tc.limited, verdict)
			}
			if tc.limited && !strings.Contains(verdict, "6.07 GiB") {
				t.Errorf("bound: want reserved 4.07 GiB + 2.00 GiB = 6.07 GiB: %s", verdict)
			}
		})
	}
}
