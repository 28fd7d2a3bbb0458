package snapshot_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/load/loadtest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// plotSim is a run whose page has every kind of element: two blocks
// allocated before recording (one freed during it, one live at the dump),
// then three steps allocating and freeing on shared stacks.
func plotSim() *st.Sim {
	s := st.NewSim()
	fwd := s.Stack(s.F("/src/model.py", 93, "forward"), s.F("/lib/torch/nn/modules/module.py", 1787, "_call_impl"), s.F("C:\\jobs\\train.py", 40, "<module>"))
	attn := s.Stack(s.F("/src/model.py", 120, "attention"), s.F("/src/model.py", 93, "forward"), s.F("C:\\jobs\\train.py", 40, "<module>"))
	s.NoTrace = true
	old := s.Alloc(0, 6<<20, s.Stack(s.F("/src/data.py", 7, "load")))
	s.Alloc(0, 3<<20+100, s.Stack(s.F("/src/data.py", 9, "cache")))
	s.NoTrace = false
	for step := range 3 {
		x := s.Alloc(0, 4<<20, fwd)
		y := s.Alloc(0, 1000, attn)
		s.Free(0, y)
		if step == 1 {
			s.Free(0, old)
		}
		s.Free(0, x)
	}
	s.Alloc(0, 512, attn)
	return s
}

// plotEvent is what a page and its pickle must agree on.
type plotEvent struct {
	action snapshot.Action
	size   int64
	frames string
}

func plotEvents(s *snapshot.Snapshot, withFreeStacks bool) []plotEvent {
	var out []plotEvent
	for _, e := range s.Devices[0].Events {
		if e.Action != snapshot.ActionAlloc && e.Action != snapshot.ActionFreeCompleted {
			continue
		}
		pe := plotEvent{action: e.Action, size: e.Size}
		if e.Action == snapshot.ActionAlloc || withFreeStacks {
			for _, f := range s.Stacks[e.Stack] {
				fr := s.Frames[f]
				pe.frames += fmt.Sprintf("%s:%d:%s;", fr.Filename, fr.Line, fr.Name)
			}
		}
		out = append(out, pe)
	}
	return out
}

// TestTracePlot2022Pages: the alloc_data pages trace_plot wrote in 2022 and
// 2023 (made by snapshottest.TracePlotPage from the run's snapshot) give the
// run's allocations and frees in order with their sizes and stacks, the
// bytes live before recording as the baseline, and a replay peak equal to
// the simulator's.
func TestTracePlot2022Pages(t *testing.T) {
	sim := plotSim()
	dict := sim.Snapshot()
	pickle := mustRead(t, st.Marshal(dict, 4), "run.pickle")
	want := plotEvents(pickle, false)
	for _, c := range []struct {
		name     string
		layout   st.TracePlotLayout
		baseline int64
	}{
		{"2022", st.TracePlot2022, 6 << 20},
		{"2023", st.TracePlot2023, 6<<20 + 3<<20 + 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			page := st.TracePlotPage(dict, 0, c.layout)
			s := mustRead(t, page, "plot.html")
			if s.Source.Format != snapshot.FormatTracePlotHTML || len(s.Devices) != 1 || s.Recording != snapshot.RecordingPython {
				t.Fatalf("format %s, %d devices, recording %s", s.Source.Format, len(s.Devices), s.Recording)
			}
			got := plotEvents(s, false)
			// The page keeps no stack on frees, but the free of a block older
			// than the trace: its element shows the free's frames.
			if len(got) != len(want) {
				t.Fatalf("%d events, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
				}
			}
			d := s.Devices[0]
			if d.Baseline != c.baseline {
				t.Errorf("baseline %d, want %d", d.Baseline, c.baseline)
			}
			cur, peak := d.Baseline, d.Baseline
			for _, e := range d.Events {
				switch e.Action {
				case snapshot.ActionAlloc:
					cur += e.Size
				case snapshot.ActionFreeCompleted:
					cur -= e.Size
				}
				peak = max(peak, cur)
			}
			// The 2023 layout lists the block live at the dump too: the
			// replay of the page's sizes (requests) finds the simulator's
			// peak of requested bytes.
			if c.layout == st.TracePlot2023 && peak != sim.PeakRequested(0) {
				t.Errorf("peak %d, simulator %d", peak, sim.PeakRequested(0))
			}
			// The free of the block older than the trace keeps its frames.
			orphan := 0
			for _, e := range plotEvents(s, true) {
				if e.action == snapshot.ActionFreeCompleted && e.frames != "" {
					orphan++
					if e.frames != "/src/data.py:7:load;" || e.size != 6<<20 {
						t.Errorf("free of the old block: %+v", e)
					}
				}
			}
			if orphan != 1 {
				t.Errorf("%d frees with frames, want 1", orphan)
			}
			if c.layout == st.TracePlot2023 {
				// Addresses come from the headers.
				for i, e := range d.Events {
					if pe := pickleEvent(pickle, i); e.Addr != pe.Addr {
						t.Errorf("event %d at %#x, pickle %#x", i, e.Addr, pe.Addr)
						break
					}
				}
			}
		})
	}
}

// pickleEvent is the i-th alloc or free_completed event of the pickle.
func pickleEvent(s *snapshot.Snapshot, i int) snapshot.Event {
	for _, e := range s.Devices[0].Events {
		if e.Action != snapshot.ActionAlloc && e.Action != snapshot.ActionFreeCompleted {
			continue
		}
		if i == 0 {
			return e
		}
		i--
	}
	return snapshot.Event{}
}

// spaceReader yields n bytes of c without holding them.
type spaceReader struct {
	n int64
	c byte
}

func (r *spaceReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), r.n)
	for i := range p[:k] {
		p[i] = r.c
	}
	r.n -= k
	return int(k), nil
}

// TestPagesStreamed: 64 MiB of page before the data, then a base64 pickle or
// alloc_data, are read holding a few MiB (the page was read whole: 2.6× its
// size).
func TestPagesStreamed(t *testing.T) {
	dict := plotSim().Snapshot()
	p4 := st.Marshal(dict, 4)
	b64 := `<html><script>const local_files = [{"name": "snapshot.pickle", "base64": "` + base64.StdEncoding.EncodeToString(append(p4, 0)) + `"}]</script></html>`
	alloc := st.TracePlotPage(dict, 0, st.TracePlot2023)
	for _, c := range []struct {
		name string
		page []byte
	}{{"base64", []byte(b64)}, {"alloc_data", alloc}} {
		t.Run(c.name, func(t *testing.T) {
			r := io.MultiReader(strings.NewReader("<!DOCTYPE html>\n<!-- "), &spaceReader{n: 64 << 20, c: 'x'}, strings.NewReader(" -->\n"), bytes.NewReader(c.page))
			var s *snapshot.Snapshot
			var err error
			n := allocated(func() { s, err = load.Read(r, "big.html", -1, snapshot.Options{}) })
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Devices) == 0 || len(s.Devices[0].Events) == 0 {
				t.Fatalf("no events")
			}
			if n > 8<<20 {
				t.Errorf("allocated %d bytes for a 64 MiB page", n)
			}
		})
	}
}

// TestPageErrors: bad pages end in one line with the offset of the fault.
func TestPageErrors(t *testing.T) {
	head := `<html><script>const local_files = [{"name": "s", "base64": "`
	okPlot := string(st.TracePlotPage(plotSim().Snapshot(), 0, st.TracePlot2022))
	at := strings.Index(okPlot, "alloc_data = ") + len("alloc_data = ")
	cases := []struct {
		name, page, want string
		offset           int64
	}{
		{"bad base64", head + "gASV!!!!" + `"}]`, "bad base64 in the embedded snapshot", int64(len(head) + 4)},
		{"bad base64 after 10 KiB", head + strings.Repeat("AAAA", 2560) + "gA=S" + `"}]`, "bad base64 in the embedded snapshot", int64(len(head) + 10240 + 2)},
		{"unterminated base64", head + "gASV", "unterminated base64 string", int64(len(head))},
		{"base64 not a string", `<html> "base64": 12`, `"base64" field is not a string`, 17},
		{"no data", "<html><body>hello</body></html>", "HTML without an embedded snapshot", 0},
		{"segment_plot", "<html><script>let trace_data = {}", "a segment_plot page of 2022–23", 30},
		{"alloc_data syntax", okPlot[:at] + `{"actions": [1, 2,, 3]}`, "trace_plot alloc_data: invalid character ','", int64(at + 18)},
		{"alloc_data truncated", okPlot[:at+40], "the page ends inside the JSON", int64(at + 40)},
		{"suffix forward", okPlot[:at] + `{"actions": [0], "elements": [{"size": 1, "info": 0}], "suffix_table": [[0, 1], [0, null]], "string_table": ["a"]}`, "continues at 1", -1},
		{"element out of range", okPlot[:at] + `{"actions": [3], "elements": [{"size": 1, "info": null}]}`, "element 3 of 1", -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := load.Read(strings.NewReader(c.page), "p.html", -1, snapshot.Options{})
			e := loadtest.WantInputError(t, err, "p.html", c.want)
			if e.Offset != c.offset {
				t.Errorf("offset %d, want %d (%v)", e.Offset, c.offset, err)
			}
		})
	}
}

// TestPageBombOfSuffixes: a suffix chain of 200,000 entries and as many
// elements, each naming the chain's next entry (3 MB of JSON), would build
// stacks of 2·10^10 frames; the frame budget (4M + 1 per byte) stops it.
func TestPageBombOfSuffixes(t *testing.T) {
	var b strings.Builder
	const n = 200_000
	b.WriteString(`<html><script>let alloc_data = {"actions": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprint(&b, i)
	}
	b.WriteString(`], "elements_size": [`)
	b.WriteString(strings.Repeat("1,", n-1) + "1")
	b.WriteString(`], "elements_info": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprint(&b, i)
	}
	b.WriteString(`], "suffix_table": [[0,null]`)
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, ",[0,%d]", i-1)
	}
	b.WriteString(`], "string_table": ["a.py:1:f"]}</script>`)
	var err error
	m := allocated(func() { _, err = load.Read(strings.NewReader(b.String()), "bomb.html", -1, snapshot.Options{}) })
	loadtest.WantInputError(t, err, "bomb.html", "expand to more frames than it can hold")
	if m > 128<<20 {
		t.Errorf("allocated %d bytes", m)
	}
}

// FuzzTracePlotHTML: any page — seeded with both alloc_data layouts and a
// base64 page — ends in a model or a one-line *Error, never a panic; a
// model holds only events whose stacks exist.
func FuzzTracePlotHTML(f *testing.F) {
	dict := plotSim().Snapshot()
	f.Add(st.TracePlotPage(dict, 0, st.TracePlot2022))
	f.Add(st.TracePlotPage(dict, 0, st.TracePlot2023))
	f.Add([]byte(`<html><script>const local_files = [{"name": "snapshot.pickle", "base64": "` + base64.StdEncoding.EncodeToString(st.Marshal(fixtureSim().Snapshot(), 4)) + `"}]</script>`))
	f.Add([]byte(`<html>let alloc_data = {"actions": [0, 0], "elements": [{"size": 5, "info": 1}], "suffix_table": [[1, null], [0, 0]], "string_table": ["5.0B allocation", "a.py:1:f"], "initially_allocated": []}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != '<' {
			data = append([]byte("<html>let alloc_data = "), data...)
		}
		s, err := load.Read(bytes.NewReader(data), "f.html", int64(len(data)), snapshot.Options{MaxStringBytes: 1 << 20})
		if err != nil {
			var e *snapshot.Error
			if !errors.As(err, &e) || strings.ContainsAny(err.Error(), "\r\n") || strings.Contains(err.Error(), "internal error") {
				t.Fatalf("error %q (%T)", err, err)
			}
			return
		}
		for _, d := range s.Devices {
			for _, e := range d.Events {
				if int(e.Stack) >= len(s.Stacks) {
					t.Fatalf("event with stack %d of %d", e.Stack, len(s.Stacks))
				}
			}
		}
	})
}
