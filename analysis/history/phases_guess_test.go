package history

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestPhasesWhateverTheGuess: Build finds the hints on the other core
// with a guess of whether frees carry their allocation's stack, and again
// once the blocks tell when the guess was wrong. On every real file,
// every device's phases, spans and steps are the same whichever way it
// guessed, and the same as the serial ComputePhases'; the files hold runs
// whose frees carry their allocation's stack and runs whose do not, and
// the guess from the first events is right on every one of them.
func TestPhasesWhateverTheGuess(t *testing.T) {
	always := func(v bool) func([]snapshot.Event) bool { return func([]snapshot.Event) bool { return v } }
	carry, own := 0, 0
	for _, f := range snapshottest.SharedInputs(t) {
		s, err := load.Open(f, snapshot.Options{})
		if err != nil {
			continue // a bad input's own tests say why
		}
		name := filepath.Base(f)
		for _, d := range s.Devices {
			hs := []*History{
				buildGuessing(s, d, nil, always(true)),
				buildGuessing(s, d, nil, always(false)),
			}
			serial := newHistory(s, d)
			serial.replayReserved()
			serial.replay()
			serial.Phases = computePhases(serial, nil, func() {})
			hs = append(hs, serial)
			actual := freesCarryAllocStacks(hs[0])
			if actual {
				carry++
			} else {
				own++
			}
			if g := guessFreesCarryAllocStacks(d.Events); g != actual && len(d.Events) > 0 {
				t.Errorf("%s device %d: guessed frees carry their allocation's stack %v, the blocks say %v", name, d.ID, g, actual)
			}
			for i, h := range hs[1:] {
				a, b := hs[0].Phases, h.Phases
				if !reflect.DeepEqual(a.Code, b.Code) || !reflect.DeepEqual(a.Sources, b.Sources) ||
					!reflect.DeepEqual(a.Spans, b.Spans) || !reflect.DeepEqual(a.steps, b.steps) {
					t.Errorf("%s device %d: history %d's phases differ from the first's (sources %v, %v; %d, %d spans)",
						name, d.ID, i+1, a.Sources, b.Sources, len(a.Spans), len(b.Spans))
				}
				if !reflect.DeepEqual(hs[0].Steps, h.Steps) {
					t.Errorf("%s device %d: history %d's steps differ from the first's", name, d.ID, i+1)
				}
			}
		}
	}
	if carry == 0 || own == 0 {
		t.Errorf("devices whose frees carry their allocation's stack: %d, whose do not: %d; want both", carry, own)
	}
}
