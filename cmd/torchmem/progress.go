package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/torchmem/torchmem/internal/units"
	"golang.org/x/term"
)

// Progress timing: nothing is drawn for a run shorter than progressDelay;
// then the line is redrawn every progressTick; a rate is shown once a
// stage has run progressRateAfter, so that the first frames never divide
// a burst of buffered bytes by a few microseconds.
const (
	progressDelay     = 500 * time.Millisecond
	progressTick      = 200 * time.Millisecond
	progressRateAfter = time.Second
)

// progress is the one status line torchmem draws on a terminal's stderr
// while it reads and analyses an input: "torchmem: reading big.pickle  45%
// 520 MiB of 1.13 GiB, 310 MiB/s", then "torchmem: analysing big.pickle
// 3 s". It is drawn from a goroutine of its own (the reader only stores a
// count), never with colours or cursor escapes — a carriage return and
// spaces — and wiped before any output is written.
type progress struct {
	w     io.Writer
	width int
	name  string
	total int64 // −1 when unknown (stdin)
	n     atomic.Int64
	now   func() time.Time
	// delay and tick are progressDelay and progressTick (tests shorten them).
	delay, tick time.Duration

	mu         sync.Mutex
	stage      string
	start      time.Time // of the whole run, for the delay
	stageStart time.Time
	drawn      int // width of the line on screen, 0 when none
	stop       chan struct{}
	stopped    chan struct{}
}

// progressEnabled decides whether stderr gets a progress line: it must be a
// terminal that can move its cursor back (not TERM=dumb), and the user
// must not have asked for --quiet.
func progressEnabled(stderr io.Writer, quiet bool, getenv func(string) string) (*os.File, int, bool) {
	f, ok := stderr.(*os.File)
	if !ok || !wantProgress(term.IsTerminal(int(f.Fd())), quiet, getenv("TERM")) {
		return nil, 0, false
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil || width <= 0 {
		width = 80
	}
	return f, width, true
}

// wantProgress is the rule: a terminal, not TERM=dumb, not --quiet.
func wantProgress(terminal, quiet bool, termName string) bool {
	return terminal && !quiet && termName != "dumb"
}

// startProgress starts the line for reading path (total bytes, −1 when
// unknown) on w, width columns wide; its ticker runs until end.
func startProgress(w io.Writer, width int, path string, total int64, now func() time.Time) *progress {
	return startProgressTimed(w, width, path, total, now, progressDelay, progressTick)
}

// startProgressTimed is startProgress drawing after delay, every tick.
func startProgressTimed(w io.Writer, width int, path string, total int64, now func() time.Time, delay, tick time.Duration) *progress {
	name := path
	if path == "-" {
		name = "stdin"
	} else {
		name = filepath.Base(path)
	}
	t := now()
	p := &progress{w: w, width: min(width, 100) - 1, name: name, total: total, now: now, stage: "reading",
		delay: delay, tick: tick,
		start: t, stageStart: t, stop: make(chan struct{}), stopped: make(chan struct{})}
	go p.run()
	return p
}

// set records the input bytes read so far (called by the reader).
func (p *progress) set(n int64) { p.n.Store(n) }

// setStage switches to the next stage ("analysing"); once the delay has
// passed, the new stage is drawn at once rather than at the next tick, so
// a short stage is never left showing the previous one.
func (p *progress) setStage(stage string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stage, p.stageStart = stage, p.now()
	if p.now().Sub(p.start) >= p.delay {
		p.draw(p.line())
	}
}

func (p *progress) run() {
	defer close(p.stopped)
	tick := time.NewTicker(p.tick)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
			p.mu.Lock()
			if p.now().Sub(p.start) >= p.delay {
				p.draw(p.line())
			}
			p.mu.Unlock()
		}
	}
}

// line is the text of the status line now.
func (p *progress) line() string {
	elapsed := p.now().Sub(p.stageStart)
	s := "torchmem: " + p.stage + " " + p.name
	if p.stage != "reading" {
		return s + fmt.Sprintf("  %d s", int(elapsed.Seconds()))
	}
	n := p.n.Load()
	switch {
	case p.total > 0:
		s += fmt.Sprintf("  %d%%  %s of %s", min(n*100/p.total, 100), units.FormatBytes(n), units.FormatBytes(p.total))
	default:
		s += "  " + units.FormatBytes(n)
	}
	if elapsed >= progressRateAfter {
		s += ", " + units.FormatBytes(int64(float64(n)/elapsed.Seconds())) + "/s"
	}
	return s
}

// draw replaces the line on screen with s, cut to the width.
func (p *progress) draw(s string) {
	if utf8.RuneCountInString(s) > p.width {
		s = string([]rune(s)[:p.width])
	}
	n := utf8.RuneCountInString(s)
	pad := ""
	if n < p.drawn {
		pad = strings.Repeat(" ", p.drawn-n)
	}
	fmt.Fprint(p.w, "\r"+s+pad)
	p.drawn = n
}

// end stops the ticker and wipes the line; it is safe to call twice.
func (p *progress) end() {
	select {
	case <-p.stop:
		return
	default:
	}
	close(p.stop)
	<-p.stopped
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn > 0 {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", p.drawn)+"\r")
		p.drawn = 0
	}
}
