package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// FuzzTracePlotPage: a 2022–23 trace_plot page from the fuzzer, end to
// end — read, analysed, written as text and Markdown. Reading ends in a
// model or one line; a model holds at most one event per two bytes of the
// page (an element is allocated and freed once); the outputs are inert,
// whatever the page's frame strings hold.
func FuzzTracePlotPage(f *testing.F) {
	s := st.NewSim()
	stack := s.Stack(s.F("model.py", 7, "forward"), s.F("train.py", 3, "<module>"))
	for i := range 4 {
		a := s.Alloc(0, int64(i+1)<<20, stack)
		if i%2 == 0 {
			s.Free(0, a)
		}
	}
	f.Add(st.TracePlotPage(s.Snapshot(), 0, st.TracePlot2022))
	f.Add(st.TracePlotPage(s.Snapshot(), 0, st.TracePlot2023))
	f.Add([]byte(`<html>let alloc_data = {"actions": [0, 1, 1, 0], "elements_size": [512, 1024], "elements_info": [0, 1], "suffix_table": [[0, null], [1, 0]], "string_table": ["\u001b[31m::error::<img src=x>:1:f", "b7f00_0 1.0KiB allocation (1024 bytes)"], "initially_allocated": [1]}`))
	f.Fuzz(func(t *testing.T, page []byte) {
		if len(page) == 0 || page[0] != '<' {
			page = append([]byte("<html>let alloc_data = "), page...)
		}
		snap, err := load.Read(bytes.NewReader(page), "page.html", int64(len(page)), snapshot.Options{MaxStringBytes: 1 << 20})
		if err != nil {
			if !snapshot.IsInputError(err) || strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("error %q (%T)", err, err)
			}
			return
		}
		events := 0
		for _, d := range snap.Devices {
			events += len(d.Events)
		}
		if events > len(page)/2 {
			t.Fatalf("%d events from a page of %d bytes", events, len(page))
		}
		r := analysis.Analyze(snap, analysis.DefaultOptions())
		var text, md bytes.Buffer
		if err := Text(&text, r); err != nil {
			t.Fatal(err)
		}
		if err := Markdown(&md, r); err != nil {
			t.Fatal(err)
		}
		if why := st.NotInert(text.String(), false); why != "" {
			t.Fatalf("text: %s", why)
		}
		own := strings.NewReplacer("<details>", "", "</details>", "", "<summary>", "", "</summary>", "")
		if why := st.NotInert(own.Replace(md.String()), true); why != "" {
			t.Fatalf("markdown: %s", why)
		}
	})
}
