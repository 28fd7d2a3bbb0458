package snapshot_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// checkBadInput requires a one-line *Error naming the file, and no panic.
func checkBadInput(t *testing.T, name string, data []byte) *snapshot.Error {
	t.Helper()
	s, err := load.Read(bytes.NewReader(data), name, int64(len(data)), snapshot.Options{})
	if err == nil {
		t.Fatalf("%s (%d bytes): decoded without error: %d devices", name, len(data), len(s.Devices))
	}
	var e *snapshot.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: error %T is not an *Error: %v", name, err, err)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, name+": ") {
		t.Fatalf("%s: error is not one line naming the file: %q", name, msg)
	}
	return e
}

func TestBadInputSmall(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	random := make([]byte, 4096)
	rng.Read(random)
	pickleNoise := append([]byte{0x80, 0x04}, random...)
	cases := []struct {
		name, data, want string
	}{
		{"empty.pickle", "", "empty file"},
		{"random.bin", string(random), "not a PyTorch memory snapshot"},
		{"noise.pickle", string(pickleNoise), ""},
		{"proto9.pickle", "\x80\x09}.", "unsupported pickle protocol 9"},
		{"int.pickle", "\x80\x04K\x05.", "not a PyTorch memory snapshot"},
		{"dict.pickle", "\x80\x04}\x94\x8c\x01a\x94K\x01s.", "without segments or device_traces"},
		{"nostop.pickle", "\x80\x04}", "truncated pickle"},
		{"html.html", "<!DOCTYPE html><p>hello</p>", "HTML without an embedded snapshot"},
		{"opcode.pickle", "\x80\x04\xff", "unknown opcode 0xff"},
		{"badmemo.pickle", "\x80\x04h\x07.", "memo entry 7, which was never stored"},
		{"oddset.pickle", "\x80\x04}(K\x01u.", "odd number"},
		{"long.pickle", "\x80\x04\x8b\x00\x00\x10\x00", "LONG4 integer of 1048576 bytes"},
		{"hugestr.pickle", "\x80\x04X\xff\xff\xff\xff", "over the limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := checkBadInput(t, c.name, []byte(c.data))
			if c.want != "" && !strings.Contains(e.Msg, c.want) {
				t.Errorf("error %q does not say %q", e, c.want)
			}
		})
	}
}

// TestNestedMarks: 100,000 nested MARKs stop at the depth limit.
func TestNestedMarks(t *testing.T) {
	data := append([]byte{0x80, 0x04}, bytes.Repeat([]byte{'('}, 100000)...)
	e := checkBadInput(t, "marks.pickle", data)
	if !strings.Contains(e.Msg, "nested MARKs") || e.Offset != 2+int64(snapshot.DefaultMaxDepth) {
		t.Errorf("got %v", e)
	}
}

// TestTruncatedRealSnapshots cuts real snapshots and requires a clean
// "truncated" error at an offset within the cut: every cut of the small
// files, evenly spaced cuts of the others.
func TestTruncatedRealSnapshots(t *testing.T) {
	for _, path := range snapshottest.RealSnapshots(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		step := 1
		switch {
		case len(data) > 100_000:
			step = len(data)/40 + 1
		case len(data) > 2000:
			step = len(data)/400 + 1
		}
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			for cut := 1; cut < len(data); cut += step {
				e := checkBadInput(t, name, data[:cut])
				if !strings.Contains(e.Msg, "truncated") || e.Offset > int64(cut) || e.Offset < 0 {
					t.Fatalf("cut at %d: %v", cut, e)
				}
			}
		})
	}
}

// TestHostileCheap: small or compressed inputs that would make a naive
// decoder allocate without bound end quickly with an error.
func TestHostileCheap(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want string
	}{
		// A 1 KB pickle claiming a 4 GB string: refused before reading it.
		{"claims 4GB string", append([]byte("\x80\x04X\xff\xff\xff\xff"), make([]byte, 1000)...), "over the limit"},
		{"claims 2^63 string", []byte("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x7f"), "over the limit"},
		// gzip bombs: millions of values pushed, or memoized.
		{"bomb of values", snapshottest.Gzip(append([]byte("\x80\x04]("), bytes.Repeat([]byte("N"), 8<<20)...)), "pickle values"},
		{"bomb of memo", snapshottest.Gzip(append([]byte("\x80\x04"), bytes.Repeat([]byte("N\x940"), 12<<20)...)), "memo entries"},
		{"memo cycle", []byte("\x80\x04]\x94h\x00a."), "not of memory segments"},
		// A frame, then a list of 8M fetches of it in one batch: the frames
		// fast path never holds more than a read buffer's worth (or
		// MaxValues), and the slow path refuses the batch.
		{"bomb of frame fetches", snapshottest.Gzip(append([]byte("\x80\x04]\x94}\x94(\x8c\x08filename\x8c\x01a\x8c\x04lineK\x01\x8c\x04name\x8c\x01fua]("),
			append(bytes.Repeat([]byte("h\x01"), 8<<20), "ea."...)...)), "pickle values"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := snapshot.Options{MaxMemo: 1 << 20, MaxValues: 1 << 20}
			_, err := load.Read(bytes.NewReader(c.data), "hostile.pickle", -1, opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestTenMillionNestedArrays: JSON with 10 million nested arrays (10 MB,
// gzip-compressed to a few KB) stops at the depth limit after reading about
// 10,000 bytes, with the offset.
func TestTenMillionNestedArrays(t *testing.T) {
	var raw bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&raw, gzip.BestCompression)
	zw.Write([]byte(`{"traceEvents": [{"ph": "X", "name": "op", "args": {"a": `))
	zw.Write(bytes.Repeat([]byte{'['}, 10_000_000))
	zw.Close()
	_, err := load.Read(bytes.NewReader(raw.Bytes()), "deep.json.gz", int64(raw.Len()), snapshot.Options{})
	if err == nil || !strings.Contains(err.Error(), "nested deeper than 10000") {
		t.Fatalf("got %v", err)
	}
}

// TestMemoBombDefaultLimits: with the default limits a gzip bomb of memo
// entries (a few KB on disk) stops at 8M entries, under 256 MiB of memo.
func TestMemoBombDefaultLimits(t *testing.T) {
	var raw bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&raw, gzip.BestCompression)
	zw.Write([]byte("\x80\x04"))
	chunk := bytes.Repeat([]byte("N\x940"), 1<<20)
	for i := 0; i < 10; i++ { // 10M entries
		zw.Write(chunk)
	}
	zw.Close()
	_, err := load.Read(bytes.NewReader(raw.Bytes()), "bomb.pickle.gz", int64(raw.Len()), snapshot.Options{})
	if err == nil || !strings.Contains(err.Error(), "more than 8388608 memo entries") {
		t.Fatalf("got %v", err)
	}
}
