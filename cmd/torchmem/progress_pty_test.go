//go:build linux || darwin

package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/creack/pty"
	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// TestProgressOnTerminal runs torchmem with its stderr on a
// pseudo-terminal (what a user's shell gives it): the progress line is
// drawn there, as wide as the terminal, and never with TERM=dumb or
// --quiet. End to end: analyze reading stdin draws "reading stdin" while
// the input trickles in (the rest is sent once the line shows), then the
// analysis stage, with carriage returns and no escape sequence, and wipes
// it; the analysis goes to stdout.
func TestProgressOnTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	env := func(term string) func(string) string {
		return func(k string) string {
			if k == "TERM" {
				return term
			}
			return ""
		}
	}
	if _, width, ok := progressEnabled(tty, false, env("xterm")); !ok || width != 120 {
		t.Errorf("a terminal of 120 columns: progress %v, width %d", ok, width)
	}
	if _, _, ok := progressEnabled(tty, false, env("dumb")); ok {
		t.Error("TERM=dumb gets a progress line")
	}
	if _, _, ok := progressEnabled(tty, true, env("xterm")); ok {
		t.Error("--quiet gets a progress line")
	}

	t.Setenv("TERM", "xterm")
	data, err := os.ReadFile(repoRoot() + "/testdata/demo/oom_snapshot.pickle")
	if err != nil {
		t.Fatal(err)
	}
	ctx := st.Context(t)
	// What the terminal shows, as it comes.
	var mu sync.Mutex
	var screen bytes.Buffer
	shows, done := make(chan struct{}, 1), make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 4096)
		for {
			n, err := ptmx.Read(b)
			mu.Lock()
			screen.Write(b[:n])
			drawn := strings.Contains(screen.String(), "torchmem: reading stdin")
			mu.Unlock()
			if drawn {
				select {
				case shows <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	in, feed := io.Pipe()
	go func() {
		feed.Write(data[:len(data)/2])
		select {
		case <-shows:
		case <-ctx.Done():
			t.Error("no progress line on the terminal while the input was read")
		}
		feed.Write(data[len(data)/2:])
		feed.Close()
	}()
	var out bytes.Buffer
	code := run([]string{"analyze", "-"}, in, &out, tty)
	if code != exitOK || !strings.HasPrefix(out.String(), "- — snapshot, G (2.10+)\nOut of memory in forward (step 2) at model.py:64 attention") {
		t.Fatalf("exit %d: %.300s", code, out.String())
	}
	tty.Close() // the terminal's reader sees the end
	<-done
	mu.Lock()
	drawn := screen.String()
	mu.Unlock()
	for _, want := range []string{"\rtorchmem: reading stdin", "\rtorchmem: analysing stdin"} {
		if !strings.Contains(drawn, want) {
			t.Errorf("the terminal shows no %q: %q", want, drawn)
		}
	}
	if strings.ContainsRune(drawn, 0x1b) {
		t.Errorf("an escape sequence on the terminal: %q", drawn)
	}
	i := strings.LastIndex(drawn, "\r")
	if i <= 0 || strings.TrimSpace(drawn[strings.LastIndex(drawn[:i], "\r")+1:i]) != "" {
		t.Errorf("the line is not wiped at the end: %q", drawn)
	}
	for _, line := range strings.Split(drawn, "\r") {
		if len([]rune(line)) > 120 {
			t.Errorf("a line wider than the terminal: %q", line)
		}
	}
}
