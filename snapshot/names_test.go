package snapshot_test

import (
	"bytes"
	"fmt"
	"path"
	"runtime"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestLongNamesCut: a name longer than MaxNameBytes — a frame's function
// (its head kept) or file (its tail kept, base name whole), an annotation,
// a trace operator — is cut when read, with a marker saying how many bytes
// are missing, in every format; the model does not hold the long string
// (a 3 MiB name stored once and named by 256 devices' sites was copied
// into every line naming it). Names of real length are kept whole.
func TestLongNamesCut(t *testing.T) {
	long := strings.Repeat("n", 3<<20)
	file := strings.Repeat("d/", 512<<10) + "model.py"
	s := st.NewSim()
	site := s.Stack(s.F(file, 7, long), s.F("train.py", 3, "main"))
	s.Annotate(0, "ProfilerStep#1"+long, func() { s.Alloc(0, 1<<20, site) })
	pickle := st.Marshal(s.Snapshot(), 4)
	var tr bytes.Buffer
	fmt.Fprintf(&tr, `{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::%s", "pid": 1, "tid": 1, "ts": 1, "dur": 10},`, long)
	tr.WriteString(`{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2, "args": {"Total Allocated": 512, "Bytes": 512, "Addr": 4096, "Device Id": 0, "Device Type": 1}}]}`)
	for _, c := range []struct {
		name string
		data []byte
	}{{"pickle", st.Gzip(pickle)}, {"chrome trace", st.Gzip(tr.Bytes())}, {"trace_plot page", st.Gzip(st.TracePlotPage(s.Snapshot(), 0, st.TracePlot2023))}} {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			snap, err := load.Read(bytes.NewReader(c.data), "long.gz", int64(len(c.data)), snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			names := 0
			for _, f := range snap.Frames {
				for _, n := range []string{f.Name, f.Filename} {
					if len(n) > snapshot.MaxNameBytes+32 {
						t.Errorf("a name of %d bytes kept", len(n))
					}
				}
				if kept, rest, ok := strings.Cut(f.Name, "…[+"); ok {
					names++
					orig := len(long)
					if strings.HasPrefix(f.Name, "aten::") {
						orig += len("aten::")
					}
					if rest != fmt.Sprint(orig-len(kept))+" bytes]" {
						t.Errorf("the marker %q does not say the %d bytes cut", rest, orig-len(kept))
					}
				}
				if strings.HasSuffix(f.Filename, "model.py") {
					marker, kept, _ := strings.Cut(f.Filename, "…")
					if path.Base(f.Filename) != "model.py" || marker != fmt.Sprintf("[+%d bytes]", len(file)-len(kept)) {
						t.Errorf("file %.40q…%q: want its tail and base name kept after a marker of the bytes cut", f.Filename, f.Filename[len(f.Filename)-20:])
					}
				}
			}
			for _, a := range snap.Annotations {
				if len(a.Name) > snapshot.MaxNameBytes+32 {
					t.Errorf("an annotation of %d bytes kept", len(a.Name))
				}
			}
			if names == 0 {
				t.Errorf("no long frame name read")
			}
			t.Logf("model holds %d bytes", held)
			if held > 2<<20 {
				t.Errorf("the model holds %d bytes: the long names are kept", held)
			}
			runtime.KeepAlive(snap)
		})
	}
	for _, n := range []string{"", "forward", strings.Repeat("x", snapshot.MaxNameBytes)} {
		if snapshot.CutName(n) != n || snapshot.CutPath(n) != n {
			t.Errorf("a name of %d bytes was cut", len(n))
		}
	}
	if got := snapshot.CutName(strings.Repeat("é", snapshot.MaxNameBytes)); !strings.HasPrefix(got, strings.Repeat("é", (snapshot.MaxNameBytes-snapshot.CutMarkerBytes)/2)+"…[+") || snapshot.CutName(got) != got {
		t.Errorf("cut inside a character, or cut again: %q", got[len(got)-40:])
	}
}
