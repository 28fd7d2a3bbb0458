package pickle

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// splitAfterTest is when the tests start the second decoder: just after
// the trace's slice is reserved.
const splitAfterTest = reserveAfter + 64

// splitRead decodes data as a mapped input, the second decoder started
// after after entries at offset at (−1: an entry about halfway; after
// math.MaxInt: never); patient: the main decoder lets it read all it can
// before it takes its work (else it stops it where it is). started, when not nil, runs in the main decoder
// just after the second one starts. It returns the model, how many
// entries the second decoder read that were kept, and the error.
func splitRead(data []byte, opts snapshot.Options, after int, at int64, patient bool, started func(*vm)) (*snapshot.Snapshot, int, error) {
	var m *vm
	s, err := readMappedWith(data, snapshot.Source{Path: "x.pickle"}, opts, nil, nil, func(v *vm) {
		m = v
		v.splitTune = splitTune{after: after, at: at, force: true, patient: patient, started: started}
	})
	return s, m.splitTook, err
}

// opStarts are the offsets where data's opcodes start (the opcodes
// torchmem's generators write).
func opStarts(t *testing.T, data []byte) []int {
	t.Helper()
	var out []int
	for pos := 0; pos < len(data); {
		out = append(out, pos)
		n := 0
		switch c := data[pos]; c {
		case '(', ')', ']', '}', 'N', 'e', 'u', 'a', 's', 't', 'l', 'd', '0', '1', '2', '.',
			0x94, 0x88, 0x89, 0x85, 0x86, 0x87, 0x8f, 0x90, 0x91:
			n = 1
		case 'K', 'h', 'q', 0x80:
			n = 2
		case 'M':
			n = 3
		case 'J', 'j', 'r':
			n = 5
		case 'G', 0x95:
			n = 9
		case 0x8a, 0x8c, 'C', 'U':
			n = 2 + int(data[pos+1])
		case 0x8b, 'X', 'B', 'T':
			n = 5 + int(binary.LittleEndian.Uint32(data[pos+1:]))
		default:
			t.Fatalf("opcode 0x%02x at %d: not one the generators write", c, pos)
		}
		pos += n
	}
	return out
}

// reframe cuts data (protocol 4) into FRAMEs of about every bytes at
// opcode boundaries, as CPython's framer cuts its 64 KiB ones, replacing
// the ones it has.
func reframe(t *testing.T, data []byte, every int) []byte {
	t.Helper()
	ops := opStarts(t, data)
	var body []byte
	var bounds []int
	for i, p := range ops[1:] { // after PROTO
		end := len(data)
		if i+2 < len(ops) {
			end = ops[i+2]
		}
		if data[p] != 0x95 {
			bounds = append(bounds, len(body))
			body = append(body, data[p:end]...)
		}
	}
	out := slices.Clone(data[:2])
	start := 0
	cut := func(end int) {
		out = append(out, 0x95)
		out = binary.LittleEndian.AppendUint64(out, uint64(end-start))
		out = append(out, body[start:end]...)
		start = end
	}
	for _, b := range bounds {
		if b-start >= every {
			cut(b)
		}
	}
	cut(len(body))
	return out
}

// splitInputs are the second decoder's inputs: the training and dense
// shapes tools/gen writes, small (a few thousand entries past the
// reserve), as the generator writes them (no FRAMEs) and cut into FRAMEs
// of a few KiB (entries across FRAME headers every few dozen); and the
// template's cases (templateCases) repeated past the reserve: six orders
// of keys, every action, every integer width, entries the template cannot
// read, memo slots of its keys overwritten.
func splitInputs(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, c := range map[string]st.TrainingConfig{
		"training": {TargetBytes: 4_600_000},
		"dense":    {TargetBytes: 1_600_000, SharedStacks: true, Gen: 'E'},
		// Entries without a frames key among entries with one (PyTorch
		// 2.2's segment_free): the second decoder's entries without a
		// stack beside its own stacks.
		"frameless completions": {TargetBytes: 3_000_000, FramelessCompletions: true},
	} {
		var buf bytes.Buffer
		if _, err := st.WriteTraining(&buf, c); err != nil {
			t.Fatal(err)
		}
		out[name] = buf.Bytes()
		out[name+" framed"] = reframe(t, buf.Bytes(), 3000)
	}
	cases := templateCases()["protocol 4"]
	// Its trace nine times over: the list's MARK … APPENDS batches again
	// (its last APPENDS, then the APPEND of the list to the traces).
	start := bytes.Index(cases, []byte{']', 0x94, ']', 0x94, '('})
	last := bytes.LastIndex(cases, []byte("eau."))
	if start < 0 || last < start {
		t.Fatal("template cases: no trace found")
	}
	trace := cases[start+4 : last]
	rest := slices.Concat(cases[:last], bytes.Repeat(slices.Concat([]byte{'e'}, trace), 8), cases[last:])
	out["template cases framed"] = reframe(t, rest, 2000)
	return out
}

// splitPoint is an offset the second decoder is made to start at.
type splitPoint struct {
	at    int64
	what  string
	entry bool // an entry's EMPTY_DICT, past where the second decoder starts
}

// splitPoints are where the tests start the second decoder in data: an
// entry about halfway, entries of the second half, every opcode and every
// byte of a stretch across a batch's APPENDS and MARK, FRAME headers (and
// the byte after, and the entry across one), the list's end.
func splitPoints(t *testing.T, data []byte) []splitPoint {
	t.Helper()
	ops := opStarts(t, data)
	var entries, frames []int
	for i, p := range ops {
		switch {
		case data[p] == '}' && i+2 < len(ops) && data[ops[i+1]] == 0x94 && data[ops[i+2]] == '(' && p > len(data)*2/3:
			entries = append(entries, i)
		case data[p] == 0x95 && p > len(data)*2/3:
			frames = append(frames, i)
		}
	}
	if len(entries) < 100 {
		t.Fatalf("%d entries in the last third", len(entries))
	}
	points := []splitPoint{{at: -1, what: "halfway", entry: true}}
	for k := range 6 {
		i := entries[k*len(entries)/6]
		points = append(points, splitPoint{at: int64(ops[i]), what: fmt.Sprintf("entry %d", i), entry: true})
	}
	// A batch's end: the APPENDS at entries[j]−2.
	j := slices.IndexFunc(entries, func(i int) bool { return data[ops[i-1]] == '(' && data[ops[i-2]] == 'e' })
	if j < 0 {
		t.Fatal("no batch boundary in the last third")
	}
	for _, i := range ops[entries[j]-12 : entries[j]+12] {
		points = append(points, splitPoint{at: int64(i), what: fmt.Sprintf("opcode 0x%02x at %d", data[i], i), entry: data[i] == '}'})
	}
	for p := ops[entries[j]+5]; p < ops[entries[j]+5]+10; p++ {
		points = append(points, splitPoint{at: int64(p), what: fmt.Sprintf("byte %d", p)})
	}
	for _, i := range frames[:min(2, len(frames))] {
		crossing := slices.IndexFunc(entries, func(e int) bool { return e > i }) - 1
		points = append(points, splitPoint{at: int64(ops[i]), what: "FRAME"}, splitPoint{at: int64(ops[i] + 1), what: "FRAME+1"},
			splitPoint{at: int64(ops[i+1]), what: "after a FRAME", entry: data[ops[i+1]] == '}'},
			splitPoint{at: int64(ops[entries[crossing]]), what: "an entry across a FRAME", entry: true})
	}
	// The last entry's SETITEMS, then the list's last APPENDS.
	lastU := entries[len(entries)-1] + slices.IndexFunc(ops[entries[len(entries)-1]:], func(p int) bool { return data[p] == 'u' })
	points = append(points, splitPoint{at: int64(ops[lastU+1]), what: "the list's end"}, splitPoint{at: int64(ops[lastU+2]), what: "past the list's end"})
	return points
}

// TestSplitMatchesSequential starts the second decoder at many points of
// real-shaped inputs and requires the model and the error of a sequential
// decoding, the same IDs: at an entry of the last third it must read
// entries that are kept (all the training and dense shapes' but their
// last), elsewhere it may not.
func TestSplitMatchesSequential(t *testing.T) {
	opts := snapshot.Options{}.WithDefaults()
	for name, data := range splitInputs(t) {
		t.Run(name, func(t *testing.T) {
			want, _, wantErr := splitRead(data, opts, math.MaxInt, -1, false, nil)
			if wantErr != nil {
				t.Fatal(wantErr)
			}
			merged, entries := 0, 0
			for i, p := range splitPoints(t, data) {
				// Every other start, A waits for B to read all it can:
				// what B reads does not depend on how soon A gets there.
				patient := i%2 == 0
				got, took, err := splitRead(data, opts, splitAfterTest, p.at, patient, nil)
				if err != nil {
					t.Fatalf("%s: %v", p.what, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("split at %s (%d): the model differs from the sequential one", p.what, p.at)
				}
				if p.entry && patient && took == 0 {
					t.Logf("not merged: %s at %d of %d", p.what, p.at, len(data))
				}
				if p.entry && patient {
					entries++
					if took > 0 {
						merged++
					}
				}
			}
			t.Logf("%d of %d starts at an entry merged", merged, entries)
			// The template cases overwrite memo slots all along: B's work
			// is dropped. Where completions have no frames, B may start at
			// a key order A has not kept a template of: some of its work
			// must be kept (its entries without a stack among its own
			// stacks), not nine tenths.
			switch {
			case strings.HasPrefix(name, "frameless completions"):
				if merged == 0 {
					t.Errorf("none of %d starts at an entry merged", entries)
				}
			case name != "template cases framed" && merged < entries*9/10:
				t.Errorf("%d of %d starts at an entry merged, want nine in ten", merged, entries)
			}
		})
	}
}

// TestSplitHostile: inputs on which the second decoder's work must be
// dropped or cut short, with the model or the error (its message and
// offset) of a sequential decoding: a memo slot overwritten after it
// started (before where it starts), a start inside a bytes object that
// holds an entry, the file cut short in its part, the memo's bound
// exceeded in its part.
func TestSplitHostile(t *testing.T) {
	var buf bytes.Buffer
	if _, err := st.WriteTraining(&buf, st.TrainingConfig{TargetBytes: 4_600_000}); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	ops := opStarts(t, data)
	// An entry start at 4/5 of the file: B starts there.
	at := ops[slices.IndexFunc(ops, func(p int) bool {
		return p > len(data)*4/5 && data[p] == '}' && data[p+1] == 0x94 && data[p+2] == '('
	})]
	// Memo slot 0 (the snapshot's dict) overwritten with None before an
	// entry at 3/4 of the file (after B starts): NONE, LONG_BINPUT 0, POP.
	before := ops[slices.IndexFunc(ops, func(p int) bool {
		return p > len(data)*3/4 && data[p] == '}' && data[p+1] == 0x94 && data[p+2] == '('
	})]
	overwritten := slices.Concat(data[:before], []byte{'N', 'r', 0, 0, 0, 0, '0'}, data[before:])
	// The bytes of the entry at at, whole, in a bytes object before it
	// (BINBYTES, POP): B starts in it and reads an entry A never reads.
	ai := slices.Index(ops, at)
	end := ops[ai+slices.IndexFunc(ops[ai:], func(p int) bool { return data[p] == 'u' })] + 1
	inString := slices.Concat(data[:at], []byte{'B'}, binary.LittleEndian.AppendUint32(nil, uint32(end-at)), data[at:end], []byte{'0'}, data[at:])
	var seq *vm
	if _, err := readMappedWith(data, snapshot.Source{Path: "x.pickle"}, snapshot.Options{}.WithDefaults(), nil, nil, func(v *vm) {
		seq, v.splitTune.after = v, math.MaxInt
	}); err != nil {
		t.Fatal(err)
	}
	memoLen := seq.memo.len()
	small := snapshot.Options{MaxMemo: memoLen - 2000}.WithDefaults()
	for _, c := range []struct {
		name    string
		data    []byte
		opts    snapshot.Options
		at      int64
		wantErr bool
		dropped bool // none of B's entries may be kept
	}{
		{"a memo slot overwritten after B started", overwritten, snapshot.Options{}.WithDefaults(), int64(at + 7), false, true},
		{"a memo slot overwritten, B halfway", overwritten, snapshot.Options{}.WithDefaults(), -1, false, true},
		{"B in a bytes object holding an entry", inString, snapshot.Options{}.WithDefaults(), int64(at + 5), false, true},
		{"cut short in B's part", data[:len(data)*9/10], snapshot.Options{}.WithDefaults(), int64(at), true, false},
		{"cut short, B halfway", data[:len(data)*9/10], snapshot.Options{}.WithDefaults(), -1, true, false},
		{"the memo's bound exceeded in B's part", data, small, int64(at), true, false},
		{"the memo's bound exceeded, B halfway", data, small, -1, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, _, wantErr := splitRead(c.data, c.opts, math.MaxInt, -1, false, nil)
			if (wantErr != nil) != c.wantErr {
				t.Fatalf("sequential: error %v", wantErr)
			}
			for _, patient := range []bool{true, false} {
				started := false
				got, took, err := splitRead(c.data, c.opts, splitAfterTest, c.at, patient, func(*vm) { started = true })
				if !started {
					t.Fatal("the second decoder did not start")
				}
				if fmt.Sprint(err) != fmt.Sprint(wantErr) {
					t.Errorf("error %v, sequential %v", err, wantErr)
				}
				if !reflect.DeepEqual(got, want) {
					t.Error("the model differs from the sequential one")
				}
				if c.dropped && took > 0 {
					t.Errorf("%d entries of B kept", took)
				}
			}
		})
	}
}

// TestSplitRealSnapshots decodes every real snapshot with the second
// decoder started about halfway (where its trace is long enough to be
// reserved) and requires the sequential model: real framing, key orders,
// stacks and metadata.
func TestSplitRealSnapshots(t *testing.T) {
	opts := snapshot.Options{}.WithDefaults()
	started := 0
	for _, path := range st.SharedInputs(t) {
		if !strings.Contains(path, ".pickle") && !strings.HasSuffix(path, ".pkl") {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(path, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if data, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		want, _, wantErr := splitRead(data, opts, math.MaxInt, -1, false, nil)
		on := false
		got, took, err := splitRead(data, opts, splitAfterTest, -1, true, func(*vm) { on = true })
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the second decoder changed the model or the error (%v, sequential %v)", filepath.Base(path), err, wantErr)
		}
		if on {
			started++
			t.Logf("%s: %d entries read by the second decoder", filepath.Base(path), took)
		}
	}
	t.Logf("the second decoder started on %d real snapshots", started)
}

// FuzzSplitSameAsSequential changes one byte of the dense shape's last
// two fifths, where the second decoder reads, and starts it at an entry
// about halfway or at a given offset: the model or the error (message
// and offset) must be the sequential decoding's.
func FuzzSplitSameAsSequential(f *testing.F) {
	var buf bytes.Buffer
	if _, err := st.WriteTraining(&buf, st.TrainingConfig{TargetBytes: 1_600_000, SharedStacks: true, Gen: 'E'}); err != nil {
		f.Fatal(err)
	}
	base := buf.Bytes()
	for i, b := range []byte{'N', '.', 'e', '(', '}', 0x94, 0x95, 'h', 'j', 0x8c, 'u', 0} {
		f.Add(uint32(i*7919), b, uint32(i*104729), i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, pos uint32, b byte, at uint32, halfway bool) {
		from := len(base) * 3 / 5
		data := slices.Clone(base)
		data[from+int(pos)%(len(base)-from)] = b
		start := int64(from + int(at)%(len(base)-from))
		if halfway {
			start = -1
		}
		opts := snapshot.Options{}.WithDefaults()
		want, _, wantErr := splitRead(data, opts, math.MaxInt, -1, false, nil)
		got, _, err := splitRead(data, opts, splitAfterTest, start, true, nil)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("error %v, sequential %v", err, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatal("the model differs from the sequential one")
		}
	})
}
