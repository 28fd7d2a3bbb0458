package pickle

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// decodeFast decodes data with the trace-entry fast path on or off and
// returns the model, how many entries the fast path took and the error.
func decodeFast(t *testing.T, data []byte, fast bool) (*snapshot.Snapshot, int, error) {
	t.Helper()
	var m *vm
	s, err := readPickleWith(bufio.NewReader(bytes.NewReader(data)), snapshot.Source{Path: "x.pickle"}, snapshot.Options{}.WithDefaults(), int64(len(data)),
		func(v *vm) { m, v.fast.off = v, !fast })
	return s, m.fast.entries, err
}

// entryCases are snapshots whose entries take each branch of the fast path
// and each way out of it: a frames list of one frame (APPEND), an empty
// one, a shared one fetched from the memo, frames not yet reduced (inline
// frame dicts), an inline action string, an oom with device_free, a key
// the fast path does not know holding a list, a None, and big numbers.
func entryCases() map[string][]byte {
	f1 := st.D("filename", "train.py", "line", 10, "name", "<module>")
	f2 := st.D("filename", "model.py", "line", 60, "name", "forward")
	shared := st.L(f1, f2)
	entry := func(action string, addr uint64, size int64, frames *st.List, more ...any) *st.Dict {
		d := st.D("action", action, "addr", addr, "size", size, "stream", 0, "time_us", int64(1_754_000_000_000_000)+int64(addr%1000))
		if frames != nil {
			d.Set("frames", frames)
		}
		for i := 0; i+1 < len(more); i += 2 {
			d.Set(more[i].(string), more[i+1])
		}
		return d
	}
	var trace []any
	for i := range 3000 {
		a := uint64(0x7f0000000000 + i*512)
		switch i % 7 {
		case 0:
			trace = append(trace, entry("alloc", a, 512, st.L(f1)))
		case 1:
			trace = append(trace, entry("alloc", a, 1<<40, st.L()))
		case 2:
			trace = append(trace, entry("free_requested", a, 512, shared), entry("free_completed", a, 512, shared))
		case 3:
			trace = append(trace, entry("oom", 0, 1<<30, st.L(f1, f2), "device_free", int64(1<<33)))
		case 4:
			trace = append(trace, entry("alloc", a, 512, st.L(f2, f1), "cpp_frames", st.L("a", "b")))
		case 5:
			trace = append(trace, entry("alloc", a, 512, st.L(st.D("filename", "new.py", "line", i, "name", "f"), f1), "user_metadata", nil))
		default:
			trace = append(trace, entry("segment_map", a, 2<<20, nil, "compile_context", "N/A"))
		}
	}
	snap := st.D("segments", st.L(), "device_traces", st.L(st.L(trace...)))
	return map[string][]byte{"protocol 4": st.Marshal(snap, 4), "protocol 2": st.Marshal(snap, 2)}
}

// TestEntryFastPath: the trace-entry fast path (the entry template on)
// leaves the model exactly as the opcodes one by one leave it, on every
// real snapshot, the generated training runs (both shapes) and entries
// made to take each of its ways out, and on damaged copies (the same
// error); and it takes 99% of the generated runs' entries (those with a
// new frame take the opcodes).
func TestEntryFastPath(t *testing.T) {
	inputs := entryCases()
	for _, shared := range []bool{false, true} {
		var buf bytes.Buffer
		if _, err := st.WriteTraining(&buf, st.TrainingConfig{TargetBytes: 3 << 20, SharedStacks: shared}); err != nil {
			t.Fatal(err)
		}
		inputs["generated, shared lists "+map[bool]string{false: "no", true: "yes"}[shared]] = buf.Bytes()
	}
	// Damaged copies: cut inside the trace (the same error both ways), or a
	// byte changed, at offsets spread over it.
	gen := inputs["generated, shared lists no"]
	for k := 1; k <= 6; k++ {
		at := len(gen) * k / 7
		inputs[fmt.Sprintf("cut at %d", at)] = gen[:at]
		for _, b := range []byte{'j', 0x8a, 'e', 'u', 0x95} {
			bad := bytes.Clone(gen)
			bad[at] = b
			inputs[fmt.Sprintf("byte %d set to %#x", at, b)] = bad
		}
	}
	for _, path := range st.RealSnapshots(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		inputs[filepath.Base(path)] = data
	}
	for name, data := range inputs {
		fast, took, ferr := decodeFast(t, data, true)
		slow, none, serr := decodeFast(t, data, false)
		// A damaged file fails both ways, not always with the same words:
		// the fast path reduces an entry at its SETITEMS, the opcodes at
		// its batch's APPENDS, so garbage after it meets another stack.
		damaged := strings.HasPrefix(name, "byte")
		if (ferr == nil) != (serr == nil) || ferr != nil && !damaged && ferr.Error() != serr.Error() {
			t.Errorf("%s: fast path error %v, opcodes one by one %v", name, ferr, serr)
			continue
		}
		if ferr != nil {
			continue
		}
		if none != 0 {
			t.Errorf("%s: the fast path took %d entries while off", name, none)
		}
		if diff := cmp.Diff(slow, fast, cmpopts.EquateEmpty(), cmp.AllowUnexported(snapshot.Snapshot{})); diff != "" {
			t.Errorf("%s: the fast path's model differs (-opcodes +fast):\n%s", name, diff)
		}
		events := 0
		for _, d := range fast.Devices {
			events += len(d.Events)
		}
		if !strings.HasPrefix(name, "byte") && !strings.HasPrefix(name, "cut") {
			t.Logf("%s: %d of %d entries by the fast path", name, took, events)
		}
		if strings.HasPrefix(name, "generated") && took < events*99/100 {
			t.Errorf("%s: the fast path took %d of %d entries", name, took, events)
		}
	}
}
