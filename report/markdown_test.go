package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// analyzeFile reads and analyses one input the way torchmem analyze does.
func analyzeFile(t testing.TB, path string) *result.Result {
	t.Helper()
	s, err := load.Open(path, snapshot.Options{})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return analysis.Analyze(s, analysis.DefaultOptions())
}

// TestMarkdownTicket: the Markdown for a bug ticket names the file (not a
// local path), says the verdict once, folds the failed request's stack and
// each suggestion's code into <details>, and lists each phase's peak.
// Every real file is checked; between them they must have OOMs, phases
// and suggestions with code.
func TestMarkdownTicket(t *testing.T) {
	var ooms, phases, hows int
	seen := map[result.Category]int{} // files whose ticket shows the category with bytes
	for _, path := range append([]string{demoPath}, st.SharedInputs(t)...) {
		r := analyzeFile(t, path)
		r.Input.Path = "/home/someone/private/runs/" + FileName(path)
		var b bytes.Buffer
		if err := Markdown(&b, r); err != nil {
			t.Fatal(err)
		}
		md := b.String()
		name := FileName(path)
		oomed := false
		if !strings.HasPrefix(md, "## torchmem: `"+name+"`\n") || strings.Contains(md, "/home/someone") {
			t.Errorf("%s: header %q", name, strings.SplitN(md, "\n", 2)[0])
		}
		for _, d := range r.Devices {
			if o := d.OOM; o != nil {
				if n := strings.Count(md, mdText(o.Verdict)); n != 1 {
					t.Errorf("%s: device %d's verdict said %d times", name, d.Device, n)
				}
				want := "<details><summary>Stack of the failed " + units.FormatBytes(o.RequestedBytes) + " request"
				ooms++
				oomed = true
				if !strings.Contains(md, want) || !strings.Contains(md, "```\n"+o.Stack[0]+"\n") {
					t.Errorf("%s: no folded stack for device %d's OOM", name, d.Device)
				}
			}
			// Every category holding memory has its row, named as in
			// every other output (workspace, autocast_cache,
			// cuda_graph_pool and kv_cache included).
			for c := result.Category(0); c < result.NumCategories; c++ {
				if d.Peak.Categories[c] == 0 && d.AtEnd.Categories[c] == 0 {
					continue
				}
				seen[c]++
				row := fmt.Sprintf("| %s | %s | %s |", c, units.FormatBytes(d.Peak.Categories[c]), units.FormatBytes(d.AtEnd.Categories[c]))
				if !strings.Contains(md, row) {
					t.Errorf("%s: no row %q for device %d", name, row, d.Device)
				}
			}
			phases += len(d.PhasePeaks)
			for _, pp := range d.PhasePeaks {
				if row := "| " + string(pp.Phase) + " | " + units.FormatBytes(pp.AllocatedBytes) + " | "; !strings.Contains(md, row) {
					t.Errorf("%s: no row %q for device %d", name, row, d.Device)
				}
			}
		}
		if oomed && len(r.Suggestions) == 0 {
			t.Errorf("%s: ran out of memory and no suggestion to check", name)
		}
		for i, s := range r.Suggestions {
			if s.How == "" {
				continue
			}
			hows++
			head := fmt.Sprintf("<details><summary>%d. %s: how</summary>", i+1, mdText(s.Title))
			first := strings.SplitN(s.How, "\n", 2)[0]
			if !strings.Contains(md, head) || !strings.Contains(md, "```python\n"+first+"\n") {
				t.Errorf("%s: suggestion %d's code is not folded", name, i+1)
			}
		}
		// Every fence opened is closed.
		if strings.Count(md, "```")%2 != 0 {
			t.Errorf("%s: unbalanced code fences", name)
		}
	}
	if ooms < 3 || phases == 0 || hows == 0 {
		t.Errorf("%d OOMs, %d phase peaks, %d suggestions with code checked: the test sees too little", ooms, phases, hows)
	}
	for _, c := range []result.Category{result.Workspace, result.AutocastCache, result.CUDAGraphPool, result.KVCache} {
		if seen[c] == 0 {
			t.Errorf("no real file's ticket shows %s: the test sees too little", c)
		}
	}
}

// TestMarkdownFenceEscapes: a frame or a line of code cannot close the
// fence around it.
func TestMarkdownFenceEscapes(t *testing.T) {
	if got := mdFenced("evil.py:1 f```\n## injected"); strings.Contains(got, "`") || strings.Contains(got, "\n") {
		t.Errorf("mdFenced: %q", got)
	}
}

func TestFileName(t *testing.T) {
	for in, want := range map[string]string{
		"/work/shared/snapshots/a.pickle": "a.pickle",
		`C:\runs\b.pickle`:                "b.pickle",
		"c.json":                          "c.json",
		"-":                               "stdin",
		"runs/d/":                         "d",
	} {
		if got := FileName(in); got != want {
			t.Errorf("FileName(%q) = %q, want %q", in, got, want)
		}
	}
}
