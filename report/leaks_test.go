package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/snapshot"
)

// TestLeakTextGrouped: an evaluation loop keeping two tensors a step (the
// logits and the last hidden state) makes two growing_list findings of one
// step pattern. The text says what they share once — the kind, the steps
// and where they came from, the explanation, the fix with the savings of
// both — lists the two sites, and keeps every line within 100 columns;
// Markdown the same, with a table of the sites.
func TestLeakTextGrouped(t *testing.T) {
	c := snapshottest.DefaultLeakConfig
	c.Steps, c.KeepHidden = 6, true
	b := snapshottest.Marshal(snapshottest.EvalLoopKeepingOutputs(c).Snapshot(), 4)
	s, err := load.Read(bytes.NewReader(b), "eval.pickle", int64(len(b)), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := analysis.Analyze(s, analysis.DefaultOptions())
	if len(r.Leaks) != 2 {
		t.Fatalf("want 2 growing lists, got %+v", r.Leaks)
	}
	var held, per int64
	for _, l := range r.Leaks {
		held += l.TotalBytes
		per += l.BytesPerStep
	}
	var out bytes.Buffer
	if err := Text(&out, r); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, line := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(line); n > TextWidth {
			t.Errorf("line of %d columns: %s", n, line)
		}
	}
	flat := strings.Join(strings.Fields(text), " ")
	title := "[high] growing_list on device 0 at 2 sites, steps 1–6 of 6, from the loop at eval.py:38 evaluate: " +
		units.FormatBytes(per) + " per step, " + units.FormatBytes(held) + " held"
	for _, want := range []string{title, "- model.py:150 forward: " + units.FormatBytes(c.LogitsBytes()) + " per step",
		"- model.py:146 forward: " + units.FormatBytes(c.ActivationBytes()) + " per step",
		"Saves " + units.FormatBytes(held) + " now and " + units.FormatBytes(per) + " for every further step."} {
		if !strings.Contains(flat, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	for _, once := range []string{"One site keeping a tensor every step", "fix: Keep a detached copy", "[high] growing_list"} {
		if n := strings.Count(flat, once); n != 1 {
			t.Errorf("%q %d times, want once:\n%s", once, n, text)
		}
	}
	// the fix of both saves what both hold (the saving follows the findings)
	if len(r.Suggestions) == 0 || r.Suggestions[0].ID != "detach_or_item" || r.Suggestions[0].EstimatedSavingsBytes != held {
		t.Errorf("suggestions %+v, want detach_or_item saving %d first", r.Suggestions, held)
	}
	out.Reset()
	if err := Markdown(&out, r); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	for _, want := range []string{"**growing\\_list** on device 0 (high confidence), steps 1–6 of 6, from the loop at eval.py:38 evaluate.",
		"| `model.py:150 forward` | " + units.FormatBytes(c.LogitsBytes()) + " |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if n := strings.Count(md, "One site keeping a tensor every step"); n != 1 {
		t.Errorf("markdown explains %d times:\n%s", n, md)
	}
	if testing.Verbose() {
		t.Logf("text:\n%s", text)
	}
}

// TestLeakTextWidth: the leak texts of every kind fit 100 columns.
func TestLeakTextWidth(t *testing.T) {
	c := snapshottest.DefaultLeakConfig
	deep := c
	deep.Layers, deep.Autocast, deep.VaryTokens = 12, true, true
	for name, sim := range map[string]*snapshottest.Sim{
		"retained graph": snapshottest.EvalLoop(deep, true), "reference cycle": snapshottest.CycleSawtooth(c, 4),
		"step growth": snapshottest.TrainLoopGrowingCat(c), "growing list": snapshottest.TrainLoopGrowingList(c),
	} {
		b := snapshottest.Marshal(sim.Snapshot(), 4)
		s, err := load.Read(bytes.NewReader(b), "x.pickle", int64(len(b)), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := analysis.Analyze(s, analysis.DefaultOptions())
		var out bytes.Buffer
		if err := Text(&out, r); err != nil {
			t.Fatal(err)
		}
		if len(r.Leaks) == 0 || !strings.Contains(out.String(), "\nleaks\n") {
			t.Errorf("%s: no leaks section", name)
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if n := utf8.RuneCountInString(line); n > TextWidth {
				t.Errorf("%s: line of %d columns: %s", name, n, line)
			}
		}
	}
}
