package snapshottest

import (
	"testing"
	"time"
)

// fakeTest is a test with a deadline of its own choosing.
type fakeTest struct {
	deadline time.Time
	has      bool
	cleanups []func()
}

func (f *fakeTest) Deadline() (time.Time, bool) { return f.deadline, f.has }
func (f *fakeTest) Cleanup(fn func())           { f.cleanups = append(f.cleanups, fn) }

// TestContext: the context ends before the binary's deadline by its margin,
// has no deadline without one, and ends with the test in both cases.
func TestContext(t *testing.T) {
	d := time.Now().Add(10 * time.Minute)
	f := &fakeTest{deadline: d, has: true}
	ctx := Context(f)
	got, ok := ctx.Deadline()
	if !ok || got.After(d.Add(-29*time.Second)) || got.Before(d.Add(-30*time.Second)) {
		t.Errorf("deadline %v before the binary's, want 30 s", d.Sub(got))
	}
	none := &fakeTest{}
	ctx2 := Context(none)
	if _, ok := ctx2.Deadline(); ok {
		t.Error("a deadline without one from go test")
	}
	for _, c := range []*fakeTest{f, none} {
		if len(c.cleanups) != 1 {
			t.Fatalf("%d cleanups", len(c.cleanups))
		}
		c.cleanups[0]()
	}
	if ctx.Err() == nil || ctx2.Err() == nil {
		t.Error("the context outlives the test")
	}
	for left, want := range map[time.Duration]time.Duration{
		time.Hour: 30 * time.Second, 10 * time.Minute: 30 * time.Second, time.Minute: 3 * time.Second,
		10 * time.Second: time.Second, 0: time.Second,
	} {
		if got := contextMargin(left); got != want {
			t.Errorf("margin with %v left: %v, want %v", left, got, want)
		}
	}
}
