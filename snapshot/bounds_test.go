package snapshot_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// allocated is snapshottest.HeapAllocated: the heap bytes f allocates.
var allocated = snapshottest.HeapAllocated

// pickleStr is the opcode of a string (SHORT_BINUNICODE or BINUNICODE).
func pickleStr(s string) []byte {
	if len(s) < 256 {
		return append([]byte{0x8c, byte(len(s))}, s...)
	}
	b := []byte{'X', 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(b[1:], uint32(len(s)))
	return append(b, s...)
}

// sharedNest is protocol-4 opcodes that push a list of width memo
// references to one list of width references to … depth levels down to the
// value leaf pushes: a few hundred bytes describing width^depth leaves.
// memoBase is the number of memo entries already used.
func sharedNest(leaf []byte, width, depth, memoBase int) []byte {
	b := append(append([]byte{}, leaf...), 0x94, '0') // MEMOIZE, POP
	for level := 1; level <= depth; level++ {
		b = append(b, ']', '(')
		for range width {
			b = append(b, 'h', byte(memoBase+level-1))
		}
		b = append(b, 'e', 0x94, '0') // APPENDS, MEMOIZE, POP
	}
	return append(b, 'h', byte(memoBase+depth))
}

// readBounded reads data with default options and returns the bytes
// allocated meanwhile and the error.
func readBounded(t *testing.T, name string, data []byte) (uint64, error) {
	t.Helper()
	var err error
	n := allocated(func() { _, err = load.Read(bytes.NewReader(data), name, int64(len(data)), snapshot.Options{}) })
	if err != nil && (strings.ContainsAny(err.Error(), "\n\r") || !strings.HasPrefix(err.Error(), name+": ")) {
		t.Fatalf("%s: error is not one line naming the file: %q", name, err)
	}
	return n, err
}

// TestMemoBombsOutsideTrace: pickles of under 1 KB whose allocator_settings
// or top-level keys hold lists of the same list, nested (width^depth
// strings of 400 bytes: 64 MB of text; with the keys of nested dicts
// rendered from depth 0 again, as they were, gigabytes), stop with one line
// after rendering at most 1 MiB, allocating a few MiB.
func TestMemoBombsOutsideTrace(t *testing.T) {
	leaf := pickleStr(strings.Repeat("A", 400))
	head := []byte("\x80\x04}(" + "\x8c\x08segments]" + "\x8c\x0ddevice_traces]")
	// A dict of one key whose key is the nest: keys restart nothing.
	dictKeyed := append([]byte("}("), sharedNest(leaf, 20, 1, 0)...)
	dictKeyed = append(dictKeyed, "N\x94u"...) // value None, MEMOIZE (index 2), SETITEMS
	cases := []struct {
		name string
		data []byte
	}{
		{"settings value", slicesConcat(head, pickleStr("allocator_settings"), []byte("}("), pickleStr("bomb"), sharedNest(leaf, 20, 4, 0), []byte("uu."))},
		{"top-level key", slicesConcat(head, sharedNest(leaf, 20, 4, 0), []byte("Nu."))},
		{"settings of dicts keyed by the nest", slicesConcat(head, pickleStr("allocator_settings"), []byte("}("), pickleStr("x"),
			sharedNest(dictKeyed, 20, 2, 3), []byte("uu."))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.data) > 1200 {
				t.Fatalf("the bomb is %d bytes, want a small file", len(c.data))
			}
			n, err := readBounded(t, "bomb.pickle", c.data)
			if err == nil || !strings.Contains(err.Error(), "expands to more than 1048576 bytes of text") {
				t.Fatalf("got %v, want the text limit", err)
			}
			if n > 16<<20 {
				t.Errorf("allocated %d bytes before refusing a %d-byte file", n, len(c.data))
			}
		})
	}
}

func slicesConcat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestSharedRecordsInABatch: memo fetches of one dict in a batch, before its
// first reduction, cost one reduction: a frame dict becomes the same frame,
// a trace entry fetched twice is refused.
func TestSharedRecordsInABatch(t *testing.T) {
	frame := "}(" + string(pickleStr("filename")) + string(pickleStr("a.py")) + string(pickleStr("line")) + "K\x07" +
		string(pickleStr("name")) + string(pickleStr("f")) + "u\x94" // memo 0
	entry := "}(" + string(pickleStr("action")) + string(pickleStr("alloc")) + string(pickleStr("addr")) + "K\x10" +
		string(pickleStr("size")) + "K\x20u\x94" // memo 0
	t.Run("frame fetched three times", func(t *testing.T) {
		// device_traces = [[{action: alloc, frames: [f, f, f]}]]
		data := "\x80\x04}(" + string(pickleStr("segments")) + "]" + string(pickleStr("device_traces")) + "](](}(" +
			string(pickleStr("action")) + string(pickleStr("alloc")) + string(pickleStr("addr")) + "K\x10" + string(pickleStr("size")) + "K\x20" +
			string(pickleStr("frames")) + "](" + frame + "h\x00h\x00eu" + "eeu."
		s, err := load.Read(strings.NewReader(data), "frames.pickle", -1, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ev := s.Devices[0].Events
		if len(ev) != 1 || len(s.Frames) != 1 || len(s.Stacks[ev[0].Stack]) != 3 {
			t.Fatalf("got %d events, %d frames, stack %v; want 1 event of 3 fetches of 1 frame", len(ev), len(s.Frames), s.Stacks[ev[0].Stack])
		}
	})
	t.Run("entry fetched twice", func(t *testing.T) {
		data := "\x80\x04}(" + string(pickleStr("segments")) + "]" + string(pickleStr("device_traces")) + "](](" + entry + "h\x00eeu."
		_, err := readBounded(t, "entries.pickle", []byte(data))
		if err == nil || !strings.Contains(err.Error(), "referenced twice") {
			t.Fatalf("got %v, want a refusal", err)
		}
	})
}

// TestLongStringsFetchedByManyRecords: a 1 MiB file name, then 100,000
// frame dicts of a few bytes each naming it by memo fetch, would hash 100 GB;
// the expansion budget stops the file after 64 MiB plus 32× the bytes read.
func TestLongStringsFetchedByManyRecords(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("\x80\x04")
	b.Write(pickleStr(strings.Repeat("x", 1<<20)))
	b.WriteString("\x940") // memo 0, POP
	b.Write(pickleStr("filename"))
	b.WriteString("\x940") // memo 1
	b.Write(pickleStr("line"))
	b.WriteString("\x940") // memo 2
	b.WriteString("}(")
	b.Write(pickleStr("segments"))
	b.WriteString("]")
	b.Write(pickleStr("device_traces"))
	b.WriteString("](](}(")
	b.Write(pickleStr("action"))
	b.Write(pickleStr("alloc"))
	b.Write(pickleStr("frames"))
	b.WriteString("](")
	for i := range 100_000 {
		b.WriteString("}(h\x01h\x00h\x02M")
		binary.Write(&b, binary.LittleEndian, uint16(i))
		b.WriteString("u")
	}
	b.WriteString("eueeu.")
	n, err := readBounded(t, "names.pickle", b.Bytes())
	if err == nil || !strings.Contains(err.Error(), "strings of records expand to") {
		t.Fatalf("got %v, want the expansion budget", err)
	}
	if n > 64<<20 {
		t.Errorf("allocated %d bytes", n)
	}
}

// TestValueBytesBound: a million EMPTY_LIST, TUPLE1 or EMPTY_DICT opcodes
// (1–2 KB of gzip) and four million memo fetches on the stack stop at
// Options.MaxValueBytes (32 MiB counted), where they allocated 210–480 MB
// (the fetches had no bound at all). What they allocate in all, growing the
// stack included (each growth copies it: the peak in use is a fraction),
// stays under 96 MiB.
func TestValueBytesBound(t *testing.T) {
	cases := []struct {
		name, want string
		data       []byte
	}{
		{"EMPTY_LIST", "hold more than 33554432 bytes", snapshottest.Gzip(append(append([]byte("\x80\x04"), bytes.Repeat([]byte("]"), 1_000_000)...), '.'))},
		{"TUPLE1", "hold more than 33554432 bytes", snapshottest.Gzip(append(append([]byte("\x80\x04"), bytes.Repeat([]byte("N\x85"), 1_000_000)...), '.'))},
		{"EMPTY_DICT", "hold more than 33554432 bytes", snapshottest.Gzip(append(append([]byte("\x80\x04"), bytes.Repeat([]byte("}"), 1_000_000)...), '.'))},
		{"BINGET", "pickle values on the stack", snapshottest.Gzip(append(append([]byte("\x80\x04N\x94"), bytes.Repeat([]byte("h\x00"), 4_000_000)...), '.'))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := readBounded(t, "values.pickle.gz", c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if n > 96<<20 {
				t.Errorf("allocated %d bytes before refusing", n)
			}
		})
	}
}

// TestDeviceCap: a 300-byte gzip listing 100,000 device traces, and
// segments on 300 devices, stop with one line; 256 devices are read.
func TestDeviceCap(t *testing.T) {
	nones := make([]any, 100_000)
	traces := snapshottest.Marshal(snapshottest.D("segments", snapshottest.L(), "device_traces", snapshottest.L(nones...)), 4)
	n, err := readBounded(t, "devices.pickle.gz", snapshottest.Gzip(traces))
	if err == nil || !strings.Contains(err.Error(), "device_traces lists 100000 devices, more than the limit of 256") {
		t.Fatalf("got %v", err)
	}
	if n > 16<<20 {
		t.Errorf("allocated %d bytes refusing 100,000 devices", n)
	}
	segs := func(n int) []byte {
		l := snapshottest.L()
		for d := range n {
			l.Items = append(l.Items, snapshottest.D("device", d, "address", 1<<20, "total_size", 2<<20, "stream", 0,
				"blocks", snapshottest.L(snapshottest.D("size", 2<<20, "state", "inactive"))))
		}
		return snapshottest.Marshal(snapshottest.D("segments", l, "device_traces", snapshottest.L()), 4)
	}
	_, err = readBounded(t, "segments.pickle", segs(300))
	if err == nil || !strings.Contains(err.Error(), "segments on 257 devices, more than the limit of 256") {
		t.Fatalf("got %v", err)
	}
	s, err := load.Read(bytes.NewReader(segs(256)), "ok.pickle", -1, snapshot.Options{})
	if err != nil || len(s.Devices) != 256 {
		t.Fatalf("256 devices: %v", err)
	}
	for i, d := range s.Devices {
		if d.ID != i || len(d.Segments) != 1 {
			t.Fatalf("device %d: id %d with %d segments", i, d.ID, len(d.Segments))
		}
	}
}

// TestTraceDeviceCap: [memory] events on 100,000 devices stop with one line.
func TestTraceDeviceCap(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"traceEvents": [`)
	for i := range 100_000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": %d, "args": {"Device Type": 1, "Device Id": %d, "Addr": 4096, "Bytes": 512}}`, i, i)
	}
	b.WriteString("]}")
	n, err := readBounded(t, "devices.json.gz", snapshottest.Gzip([]byte(b.String())))
	if err == nil || !strings.Contains(err.Error(), "[memory] events on more than 256 devices") {
		t.Fatalf("got %v", err)
	}
	if n > 64<<20 {
		t.Errorf("allocated %d bytes refusing 100,000 devices", n)
	}
}
