package kineto_test

import (
	"fmt"
	"strings"
	"testing"
)

// memTR is a [memory] record of device 0 with its Total Allocated and Total
// Reserved.
func memTR(ts string, typ int, addr, bytes, ta, tr int64) string {
	return fmt.Sprintf(`{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": %s, "args": {"Addr": %d, "Device Type": %d, "Device Id": 0, "Bytes": %d, "Total Allocated": %d, "Total Reserved": %d}}`,
		ts, addr, typ, bytes, ta, tr)
}

// TestTraceDeviceWalk: a device's baseline, reserved curve and diagnostics
// come from its records in time order, whether the file has them in that
// order (walked as they are filed) or not (walked again once all are read),
// and when two device types name the same device.
func TestTraceDeviceWalk(t *testing.T) {
	r0 := memTR("1", 1, 4096, 512, 512, 4096)
	r1 := memTR("3", 1, 4096, -512, 0, 4096) // Total Allocated steps by −612 from r2's
	r2 := memTR("2", 1, 8192, 100, 612, 8192)
	for _, c := range []struct {
		name    string
		records []string
		want    string
	}{
		{"in time order", []string{r0, r2, r1},
			"cuda ev=3 base=0 reserved=[{0 4096} {1 8192} {2 4096}] times=[1000 2000 3000] sizes=[512 100 512] diags=[total_allocated_mismatch]"},
		{"out of time order", []string{r0, r1, r2},
			"cuda ev=3 base=0 reserved=[{0 4096} {1 8192} {2 4096}] times=[1000 2000 3000] sizes=[512 100 512] diags=[total_allocated_mismatch]"},
		{"a free before its allocation", []string{r1, r0},
			"cuda ev=2 base=0 reserved=[{0 4096}] times=[1000 3000] sizes=[512 512] diags=[]"},
		{"two device types, one device", []string{r0, memTR("2", 6, 8192, 100, 612, 8192)},
			"cuda ev=2 base=0 reserved=[{0 4096} {1 8192}] times=[1000 2000] sizes=[512 100] diags=[]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := readTraceString(t, "["+strings.Join(c.records, ",\n")+"]")
			if len(s.Devices) != 1 {
				t.Fatalf("%d devices, want 1", len(s.Devices))
			}
			d := s.Devices[0]
			var times, sizes []int64
			for _, e := range d.Events {
				times, sizes = append(times, e.TimeNS), append(sizes, e.Size)
			}
			got := fmt.Sprintf("%s ev=%d base=%d reserved=%v times=%v sizes=%v diags=%v", d.Kind, len(d.Events), d.Baseline, d.Reserved, times, sizes, append([]string{}, diagKinds(s)...))
			if got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}
