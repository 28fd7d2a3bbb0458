package report

import (
	"bytes"
	"slices"
	"testing"

	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/rollup"
)

// TestFormatTables: the formats each command's --format lists, in its help's
// order (the first the default), each found by its name; an unknown name
// is refused with the list.
func TestFormatTables(t *testing.T) {
	three := []string{"text", "markdown", "json"}
	for _, c := range []struct {
		kind  string
		names []string
		want  []string
		look  func(string) (Format, error)
	}{
		{"analyses", Analyses.Names(), three, lookupOf(Analyses)},
		{"checks", Checks.Names(), three, lookupOf(Checks)},
		{"diffs", Diffs.Names(), three, lookupOf(Diffs)},
		{"estimates", Estimates.Names(), three, lookupOf(Estimates)},
		{"infos", Infos.Names(), []string{"text", "json"}, lookupOf(Infos)},
		{"rollups", Rollups.Names(), []string{"text", "markdown", "json", "html"}, lookupOf(Rollups)},
	} {
		if !slices.Equal(c.names, c.want) {
			t.Errorf("%s: formats %q, want %q", c.kind, c.names, c.want)
		}
		for _, n := range c.names {
			if f, err := c.look(n); err != nil || string(f) != n {
				t.Errorf("%s: Lookup(%q) = %q, %v", c.kind, n, f, err)
			}
		}
	}
	_, err := Infos.Lookup("markdown")
	if err == nil || err.Error() != `"markdown": want one of text, json` {
		t.Errorf("Infos.Lookup(markdown): %v", err)
	}
	_, err = Rollups.Lookup("xml")
	if err == nil || err.Error() != `"xml": want one of text, markdown, json, html` {
		t.Errorf("Rollups.Lookup(xml): %v", err)
	}
}

func lookupOf[F any](ws Writers[F]) func(string) (Format, error) {
	return func(name string) (Format, error) {
		w, err := ws.Lookup(name)
		return w.Format, err
	}
}

// TestFormatTablesWrite: a table's writer writes what the writer it names
// writes; several analyses in text are each in turn with a blank line
// between, in JSON one array; a roll-up in JSON streams its inputs.
func TestFormatTablesWrite(t *testing.T) {
	one, two := handResult(1, 40), handResult(2, 40)
	two.Input.Path = "second.pickle"
	rs := []*result.Result{one, two}
	var want bytes.Buffer
	for i, r := range rs {
		if i > 0 {
			want.WriteString("\n")
		}
		if err := TextTop(&want, r, 7); err != nil {
			t.Fatal(err)
		}
	}
	check := func(name string, got, want []byte) {
		t.Helper()
		if len(want) < 100 || !bytes.Equal(got, want) {
			t.Errorf("%s: the table wrote %d bytes, the writer %d, not the same", name, len(got), len(want))
		}
	}
	check("analyses text", write(t, Analyses, "text", rs, Options{Top: 7}), want.Bytes())
	want.Reset()
	_ = JSON(&want, rs)
	check("analyses json", write(t, Analyses, "json", rs, Options{}), want.Bytes())
	want.Reset()
	_ = Markdown(&want, one)
	check("analyses markdown of one", write(t, Analyses, "markdown", rs[:1], Options{}), want.Bytes())

	b := rollup.NewBuilder()
	for _, r := range rs {
		b.Add(r)
	}
	ru := b.Rollup()
	for _, f := range []Format{FormatText, FormatJSON} {
		w, err := Rollups.Lookup(string(f))
		if err != nil {
			t.Fatal(err)
		}
		keep := &rollup.Keeper{All: true}
		var got bytes.Buffer
		rw := w.Write(&got, Options{Top: 3, Keep: keep})
		for _, r := range rs {
			if err := rw.Input(r); err != nil {
				t.Fatal(err)
			}
		}
		streamed := got.Len()
		if err := rw.Finish(ru); err != nil {
			t.Fatal(err)
		}
		want.Reset()
		if f == FormatText {
			_ = RollupText(&want, ru, keep.Details(ru), 3)
			if streamed != 0 || len(keep.Details(ru)) != 2 {
				t.Errorf("text roll-up: %d bytes before Finish, %d results kept; want 0 and both", streamed, len(keep.Details(ru)))
			}
		} else {
			j := NewRollupJSON(&want)
			for _, r := range rs {
				_ = j.Input(r)
			}
			_ = j.Finish(ru)
			if streamed == 0 {
				t.Error("JSON roll-up: nothing written before Finish, want each input as it arrives")
			}
		}
		check("rollup "+string(f), got.Bytes(), want.Bytes())
	}
}

func write[T any](t *testing.T, ws Writers[WriteFunc[T]], name string, v T, o Options) []byte {
	t.Helper()
	w, err := ws.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := w.Write(&b, v, o); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
