package main

import (
	"fmt"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// What reading a --config allocates: at most configAllocBase plus
// configAllocPerByte per byte of the file (SECURITY.md states both;
// TestSecurityBounds checks them). Measured: 16 a byte for 1 MiB of one
// comment, 14 for one string of 1 MiB, 586 KB (the fixed part mostly) for
// 495 keys in 5 KB.
const (
	configAllocBase    = 1 << 20
	configAllocPerByte = 24
)

// TestConfigMemory: the configs that make the YAML reader work hardest
// per byte, up to the 1 MiB a config may take — the most keys, one long
// comment, one long string, long values, 1 MiB of spaces — allocate at
// most configAllocBase plus configAllocPerByte per byte (the runtime's
// count), and read.
func TestConfigMemory(t *testing.T) {
	dir := t.TempDir()
	var keys, values strings.Builder
	keys.WriteString("budgets:\n")
	values.WriteString("budgets:\n")
	for i := range 495 {
		fmt.Fprintf(&keys, "  k%d: 1\n", i)
		fmt.Fprintf(&values, "  k%d: %s\n", i, strings.Repeat("x", 2000))
	}
	for _, c := range []struct{ name, data string }{
		{"495 keys", keys.String()},
		{"a comment of 1 MiB", "budgets: {peak: 1GiB}\n#" + strings.Repeat("#", maxConfigBytes-40) + "\n"},
		{"a string of 1 MiB", "budgets: {peak: \"" + strings.Repeat("x", maxConfigBytes-40) + "\"}\n"},
		{"495 values of 2 KB", values.String()},
		{"1 MiB of spaces", "budgets: {peak: 1GiB}\n" + strings.Repeat(" ", maxConfigBytes-40)},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeTemp(t, dir, "c.yaml", []byte(c.data))
			var err error
			n := st.HeapAllocated(func() { _, err = readCheckConfig(p) })
			if err != nil && !strings.Contains(err.Error(), "unknown budget") && !strings.Contains(err.Error(), "want a size") {
				t.Fatalf("%d bytes: %v", len(c.data), err)
			}
			t.Logf("%d bytes: %d allocated (%.1f a byte)", len(c.data), n, float64(n)/float64(len(c.data)))
			if bound := uint64(configAllocBase + configAllocPerByte*len(c.data)); n > bound {
				t.Errorf("%d bytes allocated, more than %d", n, bound)
			}
		})
	}
}
