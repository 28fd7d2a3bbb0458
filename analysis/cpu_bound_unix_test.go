//go:build unix

package analysis

import (
	"bytes"
	"syscall"
	"testing"
	"time"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/snapshot"
)

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestCPUPerInputByte: reading and analysing the files that pack the most
// work into the fewest bytes — the densest records of each format, and
// pickle opcodes of two bytes that the reader must still step through —
// take at most cpuNanosPerInputByte of CPU per byte of input. CPU time, not
// the clock, so that a loaded machine does not count; the figure is
// generous (a slower machine), what it bounds is the work per byte.
func TestCPUPerInputByte(t *testing.T) {
	if raceDetector {
		t.Skip("CPU time under the race detector (5-10x its own) bounds nothing")
	}
	inputs := denseInputs(300_000)
	none := append([]byte("\x80\x04"), bytes.Repeat([]byte("N0"), 8<<20)...)
	fetch := append([]byte("\x80\x04N\x94"), bytes.Repeat([]byte("h\x000"), 6<<20)...)
	for _, c := range append(inputs, []struct {
		name string
		data []byte
	}{{"pickle None, POP", none}, {"pickle memo fetch, POP", fetch}}...) {
		t.Run(c.name, func(t *testing.T) {
			before := cpuTime(t)
			s, err := load.Read(bytes.NewReader(c.data), c.name, int64(len(c.data)), snapshot.Options{})
			if err == nil {
				Analyze(s, DefaultOptions())
			}
			used := cpuTime(t) - before
			per := float64(used.Nanoseconds()) / float64(len(c.data))
			t.Logf("%d bytes: %v of CPU, %.1f ns a byte", len(c.data), used, per)
			if per > cpuNanosPerInputByte {
				t.Errorf("%.1f ns of CPU a byte of input, more than %d", per, cpuNanosPerInputByte)
			}
		})
	}
}
