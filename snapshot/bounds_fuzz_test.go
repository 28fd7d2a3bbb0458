package snapshot_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/load/pickle"
	"github.com/torchmem/torchmem/snapshot"
)

// FuzzSettingsValues: opcodes placed where a snapshot keeps values it only
// renders — an allocator_settings value, a non-string top-level key, an
// unknown top-level key's value — end in a model or a one-line *Error, never
// a panic, and the text rendered from them stays within the file's 1 MiB.
// The first byte picks the place; seeds are the memo bombs of
// TestMemoBombsOutsideTrace.
func FuzzSettingsValues(f *testing.F) {
	leaf := pickleStr(strings.Repeat("A", 400))
	f.Add(append([]byte{0}, sharedNest(leaf, 20, 4, 0)...))
	f.Add(append([]byte{1}, sharedNest(leaf, 20, 4, 0)...))
	f.Add(append([]byte{2}, sharedNest(leaf, 20, 4, 0)...))
	f.Add([]byte("\x00}(\x8c\x011K\x01\x8c\x012K\x02u"))
	f.Add([]byte("\x01(K\x01K\x02t"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		head := "\x80\x04}(\x8c\x08segments]\x8c\x0ddevice_traces]"
		var p []byte
		switch data[0] % 3 {
		case 0:
			p = slicesConcat([]byte(head), pickleStr("allocator_settings"), []byte("}("), pickleStr("k"), data[1:], []byte("uu."))
		case 1:
			p = slicesConcat([]byte(head), data[1:], []byte("Nu."))
		default:
			p = slicesConcat([]byte(head), pickleStr("future_key"), data[1:], []byte("u."))
		}
		s, err := load.Read(bytes.NewReader(p), "fuzz.pickle", int64(len(p)), snapshot.Options{MaxStringBytes: 1 << 20})
		if err != nil {
			var e *snapshot.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not an *Error: %v", err, err)
			}
			if msg := err.Error(); strings.Contains(msg, "internal error") || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("bad error: %q", msg)
			}
			return
		}
		text := 0
		for _, k := range s.Source.Keys {
			text += len(k)
		}
		if s.Settings != nil {
			for k, v := range s.Settings.Other {
				text += len(k) + len(v)
			}
		}
		if text > 2*pickle.MaxRendered+len(p) {
			t.Fatalf("%d bytes of text rendered from a %d-byte file", text, len(p))
		}
	})
}
