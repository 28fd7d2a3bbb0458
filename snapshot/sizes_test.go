package snapshot_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/load/loadtest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestSizesAddUpBounded: a file whose sizes on one device add up past
// 256 PiB — so that a peak, a category or a what-if could wrap around
// int64 — is bad input with one line, in every format; the same shapes
// with real sizes read. Three PREEXISTING rows of 2⁶² in a memory timeline
// printed a peak of −8.00 EiB and exited 0; four allocations of 2⁶² in a
// pickle a peak of 4.00 EiB.
func TestSizesAddUpBounded(t *testing.T) {
	pickle := func(size int64, n int) string {
		var tr []any
		for i := range n {
			tr = append(tr, st.D("action", "alloc", "addr", int64(4096*(i+1)), "size", size, "stream", int64(0), "frames", st.L()))
		}
		return string(st.Marshal(st.D("segments", st.L(), "device_traces", st.L(st.L(tr...))), 4))
	}
	segments := func(size int64) string {
		blk := st.D("size", size, "requested_size", size, "state", "active_allocated", "frames", st.L())
		seg := st.D("device", int64(0), "address", int64(1<<40), "total_size", size, "allocated_size", size, "active_size", size,
			"requested_size", size, "stream", int64(0), "segment_type", "large", "blocks", st.L(blk))
		return string(st.Marshal(st.D("segments", st.L(seg), "device_traces", st.L(st.L())), 4))
	}
	timeline := func(rows ...int64) string {
		var b strings.Builder
		b.WriteString("[")
		for _, r := range rows {
			fmt.Fprintf(&b, "[-1, 1, %d, 0], ", r)
		}
		b.WriteString("[5, 2, 1024, 3]]")
		return b.String()
	}
	trace := func(bytes ...int64) string {
		var b strings.Builder
		b.WriteString(`{"traceEvents": [`)
		for i, n := range bytes {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": %d, "args": {"Device Type": 1, "Device Id": 0, "Addr": %d, "Bytes": %d}}`, i, 4096*(i+1), n)
		}
		b.WriteString("]}")
		return b.String()
	}
	const e62 = int64(1) << 62
	cases := []struct {
		name, data string
		bad        bool
	}{
		{"timeline, three preexisting rows of 2^62", timeline(e62, e62, e62), true},
		{"timeline, three preexisting rows of 2^57", timeline(1<<57, 1<<57, 1<<57), true},
		{"timeline, a create row of 2^62", strings.Replace(timeline(), "1024", fmt.Sprint(e62), 1), true},
		{"timeline, real rows", timeline(1<<30, 1<<34), false},
		{"pickle, four allocations of 2^62", pickle(e62, 4), true},
		{"pickle, 1024 allocations of 2^49", pickle(1<<49, 1024), true},
		{"pickle, 1024 allocations of 80 GiB", pickle(80<<30, 1024), false},
		{"pickle, a segment of 2^62", segments(e62), true},
		{"pickle, a segment of 80 GiB", segments(80 << 30), false},
		{"trace, [memory] events of 2^62", trace(e62, e62, -e62, -e62), true},
		{"trace, real [memory] events", trace(1<<30, -(1 << 30)), false},
	}
	// Negative PREEXISTING rows: no memory has a negative size.
	for _, rows := range [][]int64{{-1 << 63}, {-e62, -e62}, {-1}} {
		t.Run(fmt.Sprint("timeline, preexisting rows ", rows), func(t *testing.T) {
			data := timeline(rows...)
			_, err := load.Read(strings.NewReader(data), "f", int64(len(data)), snapshot.Options{})
			loadtest.WantInputError(t, err, "f", "row 0: PREEXISTING memory of -")
		})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := load.Read(strings.NewReader(c.data), "f", int64(len(c.data)), snapshot.Options{})
			switch {
			case c.bad && strings.HasPrefix(c.name, "timeline, three preexisting rows of 2^62"):
				loadtest.WantInputError(t, err, "f", "row 0: PREEXISTING memory of 4611686018427387904 bytes, or of more than 288230376151711744 in all")
			case c.bad && strings.HasPrefix(c.name, "timeline, three"):
				loadtest.WantInputError(t, err, "f", "row 2: PREEXISTING memory of 144115188075855872 bytes")
			case c.bad:
				loadtest.WantInputError(t, err, "f", "add up past 288230376151711744 bytes (256 PiB)")
			case err != nil:
				t.Errorf("%v", err)
			}
		})
	}
}
