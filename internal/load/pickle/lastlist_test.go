package pickle

import (
	"bufio"
	"bytes"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestLastListOverwrittenMemo: the fast path takes an entry whose frames
// list has the bytes of the last entry's as that entry's stack, but only
// while the memo slots those bytes fetch are unchanged. Four entries with
// the frames [f1, f2]: the first writes them out, the others fetch both
// from the memo with the same bytes; the second's commit reduces the
// first's frames (memo slots overwritten), so the third is read again and
// the fourth is taken by the last list. With f1's slot overwritten before
// the fourth (an int stored at its index, as a hostile pickle may), the
// fourth must be read again: the model is the one the opcodes make one by
// one, not the stack [f1, f2].
func TestLastListOverwrittenMemo(t *testing.T) {
	f1 := st.D("filename", "train.py", "line", 10, "name", "<module>")
	f2 := st.D("filename", "model.py", "line", 60, "name", "forward")
	entry := func(addr int) *st.Dict {
		return st.D("action", "alloc", "addr", addr, "size", 512, "stream", 0, "frames", st.L(f1, f2))
	}
	data := st.Marshal(st.D("segments", st.L(), "device_traces", st.L(st.L(entry(4096), entry(8192), entry(12288), entry(16384)))), 4)
	// A list of more than one item starts EMPTY_LIST, MEMOIZE, MARK: the
	// trace's and the four frames lists; from the second on they then are
	// BINGET f1, BINGET f2, APPENDS.
	var lists []int
	for i := 0; i+3 <= len(data); i++ {
		if bytes.Equal(data[i:i+3], []byte{']', 0x94, '('}) {
			lists = append(lists, i+2)
		}
	}
	if len(lists) != 5 {
		t.Fatalf("lists of several items at %v: want five", lists)
	}
	lists = lists[1:]
	for _, at := range lists[2:] {
		if !bytes.Equal(data[lists[1]:lists[1]+6], data[at:at+6]) || data[at+1] != 'h' || data[at+5] != 'e' {
			t.Fatalf("frames lists at %v: want the last three the same six bytes", lists)
		}
	}
	decode := func(t *testing.T, data []byte, fast bool) (*snapshot.Snapshot, *vm) {
		t.Helper()
		var m *vm
		s, err := readPickleWith(bufio.NewReader(bytes.NewReader(data)), snapshot.Source{Path: "x.pickle"}, snapshot.Options{}.WithDefaults(), int64(len(data)),
			func(v *vm) { m, v.fast.off = v, !fast })
		if err != nil {
			t.Fatal(err)
		}
		return s, m
	}
	stackOf := func(s *snapshot.Snapshot, i int) []string {
		var names []string
		for _, f := range s.StackOf(s.Devices[0].Events[i].Stack) {
			names = append(names, s.Frames[f].Name)
		}
		return names
	}

	s, m := decode(t, data, true)
	if m.fast.entries != 3 || m.fast.listHits != 1 || !slices.Equal(stackOf(s, 3), []string{"<module>", "forward"}) {
		t.Errorf("fast path took %d entries, %d by the last list; fourth stack %v: want 3, 1, [<module> forward]",
			m.fast.entries, m.fast.listHits, stackOf(s, 3))
	}

	// Before the fourth entry's EMPTY_DICT (the last one before its list):
	// BININT1 5, BINPUT at f1's index, POP.
	at := bytes.LastIndexByte(data[:lists[3]], '}')
	f1Index := data[lists[1]+2]
	bad := slices.Concat(data[:at], []byte{'K', 5, 'q', f1Index, '0'}, data[at:])
	fast, m := decode(t, bad, true)
	slow, _ := decode(t, bad, false)
	if diff := cmp.Diff(slow, fast, cmpopts.EquateEmpty(), cmp.AllowUnexported(snapshot.Snapshot{})); diff != "" {
		t.Errorf("memo slot overwritten: the fast path's model differs (-opcodes +fast):\n%s", diff)
	}
	if m.fast.listHits != 0 {
		t.Errorf("memo slot overwritten: %d entries taken by the last list, want 0", m.fast.listHits)
	}
	if got := stackOf(slow, 3); slices.Equal(got, []string{"<module>", "forward"}) {
		t.Errorf("memo slot overwritten: fourth stack %v, want one without f1", got)
	}
}
