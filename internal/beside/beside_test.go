package beside

import (
	"errors"
	"testing"
)

func TestGoReturnsWhatItComputed(t *testing.T) {
	var sum int
	wait := Go(func() {
		for i := 1; i <= 100; i++ {
			sum += i
		}
	})
	wait()
	if sum != 5050 {
		t.Fatalf("sum %d after wait, want 5050", sum)
	}
}

func TestGoHandsThePanicToTheCaller(t *testing.T) {
	boom := errors.New("boom")
	wait := Go(func() { panic(boom) })
	defer func() {
		if v := recover(); v != boom {
			t.Fatalf("wait panicked with %v, want %v", v, boom)
		}
	}()
	wait()
	t.Fatal("wait returned after the work panicked")
}

func TestGoPanicNil(t *testing.T) {
	// panic(nil) is a *runtime.PanicNilError since Go 1.21: still a panic.
	wait := Go(func() { panic(nil) })
	defer func() {
		if recover() == nil {
			t.Fatal("wait did not panic after panic(nil)")
		}
	}()
	wait()
}
