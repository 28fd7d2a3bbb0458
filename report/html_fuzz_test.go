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

// FuzzHTMLReport renders reports of snapshots whose frame names, file names
// and annotation names come from the fuzzer: rendering never fails or
// panics, and no input string opens a tag — the page has exactly the
// <script> elements of its template.
func FuzzHTMLReport(f *testing.F) {
	for _, seed := range [][3]string{
		{"model.py", "forward", "Optimizer.step#AdamW.step"},
		{"<script>alert(1)</script>", `"><img src=x onerror=alert(1)>`, "</script><script>"},
		{"\x00\x1b[31m", "\u2028\u2029", "{{.}}"},
	} {
		f.Add(seed[0], seed[1], seed[2], uint16(3))
	}
	markers := []string{"<script", "<img", "<iframe", "<svg", "onerror=", "javascript:"}
	render := func(t *testing.T, file, name, annotation string, n uint16) map[string]int {
		s := st.NewSim()
		stack := s.Stack(s.F(file, int(n), name), s.F("train.py", 1, "<module>"))
		s.Annotate(0, annotation, func() {
			for i := 0; i < int(n%8)+1; i++ {
				a := s.Alloc(0, int64(1+int(n)*512*i), stack)
				if i%2 == 1 {
					s.Free(0, a)
				}
			}
		})
		data := st.Marshal(s.Snapshot(), 4)
		snap, err := load.Read(bytes.NewReader(data), "fuzz.pickle", int64(len(data)), snapshot.Options{})
		if err != nil {
			t.Fatalf("reading the generated snapshot: %v", err)
		}
		var out bytes.Buffer
		if err := HTML(&out, analysis.Analyze(snap, analysis.DefaultOptions()), HTMLOptions{Version: "fuzz"}); err != nil {
			t.Fatal(err)
		}
		page := strings.ToLower(out.String())
		counts := map[string]int{}
		for _, m := range markers {
			counts[m] = strings.Count(page, m)
		}
		return counts
	}
	f.Fuzz(func(t *testing.T, file, name, annotation string, n uint16) {
		got := render(t, file, name, annotation, n)
		// The same run with harmless names: the template's own markers.
		want := render(t, "model.py", "forward", "step", n)
		for _, m := range markers {
			if got[m] != want[m] {
				t.Errorf("%q occurs %d times, %d with harmless names: input text reached the page unescaped", m, got[m], want[m])
			}
		}
	})
}
