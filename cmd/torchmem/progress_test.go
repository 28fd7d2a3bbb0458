package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// fakeClock is a settable clock for progress lines.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestProgressLine(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	var buf bytes.Buffer
	p := &progress{w: &buf, width: 99, name: "big.pickle", total: 1 << 30, now: clk.now, stage: "reading", start: clk.t, stageStart: clk.t}
	// The first frame: 600 MiB already buffered 1 ms after the start must
	// not be read as 600 GiB/s.
	clk.t = clk.t.Add(time.Millisecond)
	p.set(600 << 20)
	if got, want := p.line(), "torchmem: reading big.pickle  58%  600 MiB of 1.00 GiB"; got != want {
		t.Errorf("first frame %q, want %q", got, want)
	}
	clk.t = clk.t.Add(2*time.Second - time.Millisecond)
	p.set(800 << 20)
	if got, want := p.line(), "torchmem: reading big.pickle  78%  800 MiB of 1.00 GiB, 400 MiB/s"; got != want {
		t.Errorf("after 2 s %q, want %q", got, want)
	}
	// stdin: no total.
	q := &progress{w: &buf, width: 99, name: "stdin", total: -1, now: clk.now, stage: "reading", start: clk.t, stageStart: clk.t}
	q.set(5 << 20)
	if got, want := q.line(), "torchmem: reading stdin  5.00 MiB"; got != want {
		t.Errorf("stdin %q, want %q", got, want)
	}
	// The analysis.
	p.setStage("analysing")
	clk.t = clk.t.Add(3500 * time.Millisecond)
	if got, want := p.line(), "torchmem: analysing big.pickle  3 s"; got != want {
		t.Errorf("analysis %q, want %q", got, want)
	}
}

func TestProgressDrawAndEnd(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	var buf bytes.Buffer
	p := startProgress(&buf, 20, "/data/a-very-long-snapshot-name.pickle", 100, clk.now)
	p.mu.Lock()
	p.draw("torchmem: reading a-very-long-snapshot-name.pickle")
	p.draw("short")
	p.mu.Unlock()
	p.end()
	p.end() // twice is fine
	// Cut to the width (19 columns: never the last one), padded over the
	// longer line before, wiped at the end; no escape sequences.
	want := "\rtorchmem: reading a" + "\rshort" + strings.Repeat(" ", 14) + "\r" + strings.Repeat(" ", 5) + "\r"
	if got := buf.String(); got != want {
		t.Errorf("drawn %q, want %q", got, want)
	}
	if strings.ContainsRune(buf.String(), 0x1b) {
		t.Errorf("escape sequences in %q", buf.String())
	}
	// A run that ends before the delay draws nothing, though its ticker
	// has ticked: the clock stands still (so a loaded machine cannot pass
	// the delay), and each tick reads it, so the test waits for three ticks
	// rather than for a time.
	buf.Reset()
	reads := make(chan struct{}, 16)
	still := func() time.Time {
		select {
		case reads <- struct{}{}:
		default:
		}
		return clk.t
	}
	q := startProgressTimed(&buf, 80, "x", 10, still, progressDelay, time.Millisecond)
	for range 4 { // the start, then three ticks
		<-reads
	}
	q.end()
	if buf.Len() != 0 {
		t.Errorf("a fast run drew %q", buf.String())
	}
}

func TestWantProgress(t *testing.T) {
	cases := []struct {
		terminal, quiet bool
		term            string
		want            bool
	}{
		{true, false, "xterm-256color", true},
		{true, false, "", true},
		{true, false, "dumb", false},
		{true, true, "xterm", false},
		{false, false, "xterm", false},
	}
	for _, c := range cases {
		if got := wantProgress(c.terminal, c.quiet, c.term); got != c.want {
			t.Errorf("wantProgress(%v, %v, %q) = %v", c.terminal, c.quiet, c.term, got)
		}
	}
}

// TestProgressNoColor: whatever NO_COLOR says, the line carries no escape
// sequence at all (no colour, no cursor movement): there is nothing to
// turn off.
func TestProgressNoColor(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	var buf bytes.Buffer
	p := &progress{w: &buf, width: 99, name: "x.pickle", total: 10 << 20, now: clk.now, stage: "reading", start: clk.t, stageStart: clk.t}
	for i := 0; i < 5; i++ {
		clk.t = clk.t.Add(700 * time.Millisecond)
		p.set(int64(i) << 20)
		p.draw(p.line())
	}
	p.setStage("analysing")
	p.draw(p.line())
	if strings.ContainsRune(buf.String(), 0x1b) {
		t.Errorf("escape sequences: %q", buf.String())
	}
}

// TestProgressEnabled: only a terminal gets a progress line (a buffer or
// a file does not); the terminal case is TestProgressOnTerminal, on a
// pseudo-terminal.
func TestProgressEnabled(t *testing.T) {
	env := func(k string) string {
		if k == "TERM" {
			return "xterm"
		}
		return ""
	}
	var buf bytes.Buffer
	if _, _, ok := progressEnabled(&buf, false, env); ok {
		t.Error("a buffer is not a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, _, ok := progressEnabled(f, false, env); ok {
		t.Error("a file is not a terminal")
	}
}

// TestQuiet: --quiet keeps notes off stderr (errors stay).
func TestQuiet(t *testing.T) {
	out := t.TempDir() + "/r.html"
	demo := repoRoot() + "/testdata/demo/oom_snapshot.pickle"
	if code, _, stderr := runCLI(nil, "report", demo, "-o", out); code != exitOK || !strings.HasPrefix(stderr, "wrote ") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runCLI(nil, "--quiet", "report", demo, "-o", out); code != exitOK || stderr != "" {
		t.Errorf("--quiet: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runCLI(nil, "-q", "info", "/no/such/file"); code != exitInput || !strings.Contains(stderr, "no such file") {
		t.Errorf("--quiet error: exit %d, stderr %q", code, stderr)
	}
}

// TestProgressStages: the line follows the read and then the analysis, of
// a file and of stdin, and is wiped before the output is written.
func TestProgressStages(t *testing.T) {
	demo := repoRoot() + "/testdata/demo/oom_snapshot.pickle"
	data, err := os.ReadFile(demo)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		name string
	}{
		{[]string{"analyze", demo}, "oom_snapshot.pickle"},
		{[]string{"analyze", "-"}, "stdin"},
		{[]string{"report", "-o", t.TempDir() + "/r.html", demo}, "oom_snapshot.pickle"},
	} {
		var line, out, errb bytes.Buffer
		g := &globals{stdin: bytes.NewReader(data), stderr: &errb, progressTo: &line}
		root := newRootCmd(g)
		root.SetArgs(c.args)
		root.SetOut(&out)
		root.SetErr(&errb)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		drawn := line.String()
		if !strings.Contains(drawn, "\rtorchmem: analysing "+c.name+"  0 s") {
			t.Errorf("%v: no analysis stage drawn: %q", c.args, drawn)
		}
		if i := strings.LastIndex(drawn, "\r"); i < 0 || strings.TrimSpace(drawn[strings.LastIndex(drawn[:i], "\r")+1:i]) != "" {
			t.Errorf("%v: the line is not wiped at the end: %q", c.args, drawn[max(0, len(drawn)-120):])
		}
		if g.prog != nil {
			t.Errorf("%v: progress still running after the command", c.args)
		}
	}
}
