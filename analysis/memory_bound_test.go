package analysis

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// The memory a file can make torchmem take, per byte of input after gzip or
// base64 (SECURITY.md states both figures; TestSecurityBounds checks them).
const (
	// modelBytesPerInputByte bounds what the model of a file holds once
	// read: a 40-byte event from the densest record, a trace entry of 7
	// bytes of pickle (5.7 bytes a byte).
	modelBytesPerInputByte = 8
	// allocatedBytesPerInputByte bounds what reading and analysing the file
	// allocate in all, an upper bound on their peak (75 a byte for those
	// trace entries; generated training snapshots and traces peak at
	// 0.57–0.75× their size in RSS, README "Performance").
	allocatedBytesPerInputByte = 128
)

// cpuNanosPerInputByte bounds the CPU time of reading and analysing a file,
// per byte of input after gzip (SECURITY.md states it; TestSecurityBounds
// checks it; TestCPUPerInputByte measures it where the process's CPU time
// can be read): measured 148–218 at a load of 5 on 2 cores (pickle trace
// entries of 7 bytes, a 40-byte event each), 5–11 for bytes the reader
// only steps over (a gzip bomb's filler). With the default limits a file of S bytes decodes at
// most 8 GiB, a gzip file at most 64 MiB plus 128×S (snapshot.Options): a
// 9 MB gzip bomb stops after 1.2 GB, 7.4 CPU-seconds (it read on to 8 GiB).
const cpuNanosPerInputByte = 300

// denseInputs are the files that pack the most events into the fewest
// bytes, one per format: pickle trace entries of 7 bytes (a dict of an
// action fetched from the memo), alloc_data actions of a few bytes (an
// index, and an element of a size and an info), chrome-trace [memory]
// events of the fewest fields, memory-timeline rows of one digit a field,
// and a trace_plot page embedding the pickle in base64.
func denseInputs(n int) []struct {
	name string
	data []byte
} {
	short := func(s string) string { return "\x8c" + string([]byte{byte(len(s))}) + s }
	var p bytes.Buffer
	p.WriteString("\x80\x04" + short("action") + "\x940" + short("alloc") + "\x940")
	p.WriteString("}(" + short("segments") + "]" + short("device_traces") + "](]")
	for i := 0; i < n; i += 1000 {
		p.WriteString("(" + strings.Repeat("}(h\x00h\x01u", 1000) + "e")
	}
	p.WriteString("eu.")

	var a bytes.Buffer
	a.WriteString(`<html><script>let alloc_data = {"actions": [`)
	for i := range n {
		if i > 0 {
			a.WriteString(",")
		}
		fmt.Fprint(&a, i/2)
	}
	a.WriteString(`], "elements_size": [` + strings.Repeat("1,", n/2-1) + "1")
	a.WriteString(`], "elements_info": [` + strings.Repeat("0,", n/2-1) + "0")
	a.WriteString(`], "suffix_table": [[0,null]], "string_table": ["a.py:1:f"]}</script>`)

	var j bytes.Buffer
	j.WriteString(`{"traceEvents":[`)
	for i := range n {
		if i > 0 {
			j.WriteString(",")
		}
		fmt.Fprintf(&j, `{"ph":"i","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":%d,"args":{"Device Type":1,"Device Id":0,"Addr":%d,"Bytes":%d}}`,
			i, i%7, 1-2*(i%2))
	}
	j.WriteString(`]}`)

	var m bytes.Buffer
	m.WriteString("[")
	for i := range n {
		if i > 0 {
			m.WriteString(",")
		}
		m.WriteString([]string{"[0,2,1,0]", "[0,4,-1,0]"}[i%2])
	}
	m.WriteString("]")
	page := `<html><script>const local_files = [{"name": "s.pickle", "base64": "` + base64.StdEncoding.EncodeToString(p.Bytes()) + `"}]</script></html>`
	return []struct {
		name string
		data []byte
	}{{"pickle", p.Bytes()}, {"trace_plot page", []byte(page)}, {"alloc_data", a.Bytes()}, {"chrome trace", j.Bytes()}, {"memory timeline", m.Bytes()}}
}

// TestMemoryPerInputByte: for the files that pack the most events into the
// fewest bytes, the model holds at most modelBytesPerInputByte bytes per
// byte of input, and reading and analysing allocate at most
// allocatedBytesPerInputByte in all (the runtime's counts, not a clock).
func TestMemoryPerInputByte(t *testing.T) {
	for _, c := range denseInputs(300_000) {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var s *snapshot.Snapshot
			var err error
			read := allocated(func() {
				s, err = load.Read(bytes.NewReader(c.data), c.name, int64(len(c.data)), snapshot.Options{})
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Devices) != 1 || len(s.Devices[0].Events) != 300_000 {
				t.Fatalf("read %d devices, want one of 300,000 events", len(s.Devices))
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			model := after.HeapAlloc - before.HeapAlloc
			analysed := allocated(func() { Analyze(s, DefaultOptions()) })
			runtime.KeepAlive(s)
			in := float64(len(c.data))
			t.Logf("%d bytes: model %.1f bytes a byte, read allocates %.1f, read and analysis %.1f", len(c.data), float64(model)/in, float64(read)/in, float64(read+analysed)/in)
			if float64(model) > modelBytesPerInputByte*in {
				t.Errorf("the model holds %d bytes for %d bytes of input, more than %d a byte", model, len(c.data), modelBytesPerInputByte)
			}
			if float64(read+analysed) > allocatedBytesPerInputByte*in {
				t.Errorf("read and analysis allocate %d bytes for %d bytes of input, more than %d a byte", read+analysed, len(c.data), allocatedBytesPerInputByte)
			}
		})
	}
}

// allocated is snapshottest.HeapAllocated: the heap bytes f allocates.
var allocated = st.HeapAllocated

// TestMemoryPerInputByteManyDevices: a file of the most devices, each with
// its own stacks — 256 devices of 500 allocations, every one at a stack of
// its own (128,000 stacks of two of 800 frames) — allocates within
// allocatedBytesPerInputByte too: the memos of a device's stacks follow
// the stacks it uses, not the file's stack table (a table per device cost
// devices × stacks: 13 GB for 62 MB of 512,000 stacks).
func TestMemoryPerInputByteManyDevices(t *testing.T) {
	s := st.NewSim()
	var frames []*st.Dict
	for i := range 800 {
		frames = append(frames, s.F(fmt.Sprintf("m%d.py", i), i, "f"))
	}
	k := 0
	for d := range snapshot.DefaultMaxDevices {
		for range 500 {
			s.Alloc(d, 512, s.Stack(frames[k%800], frames[(k/800)%800]))
			k++
		}
	}
	data := st.Marshal(s.Snapshot(), 4)
	snap, err := load.Read(bytes.NewReader(data), "devices.pickle", int64(len(data)), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Stacks) < 128_000 {
		t.Fatalf("%d stacks, want 128,000", len(snap.Stacks))
	}
	n := allocated(func() { Analyze(snap, DefaultOptions()) })
	per := float64(n) / float64(len(data))
	t.Logf("%d bytes, %d stacks on %d devices: analysis allocates %.1f a byte", len(data), len(snap.Stacks), len(snap.Devices), per)
	if per > allocatedBytesPerInputByte {
		t.Errorf("analysis allocates %.1f bytes a byte of input, more than %d", per, allocatedBytesPerInputByte)
	}
}
