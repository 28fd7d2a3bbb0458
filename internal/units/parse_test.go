package units

import (
	"math"
	"strings"
	"testing"

	"github.com/dustin/go-humanize"
)

// TestParseBytesAgainstOldGrammars reads every form either earlier grammar
// read: go-humanize's (--budget, --tolerance, --floor, --max-input-bytes,
// config budgets and tolerance, gen --size) and estimate's (--gpu). A row's
// flagsChanged says the size now differs from what humanize makes of it (a
// bare K, M, G, T, P or E was a power of 1000 there); the test checks that
// against humanize itself, so a row cannot claim a change that is not one.
// gpuOld is what --gpu read (-1: refused); gpuChanged marks where it differs.
func TestParseBytesAgainstOldGrammars(t *testing.T) {
	const refused = -1
	for _, c := range []struct {
		in           string
		want         int64 // refused: an error
		flagsChanged bool
		gpuOld       int64
	}{
		{"0", 0, false, refused}, // --gpu still refuses 0 (ParseGPU's own bound)
		{"512", 512, false, 512},
		{"1,024", 1024, false, refused},
		{"1_000", 1000, false, refused},
		{"20GiB", 20 << 30, false, 20 << 30},
		{"1.5 GiB", 3 << 29, false, 3 << 29},
		{" 8 gib ", 8 << 30, false, 8 << 30},
		{"16384MiB", 16 << 30, false, 16 << 30},
		{"1kib", 1024, false, 1024},
		{"24Gi", 24 << 30, false, refused},
		{"1PiB", 1 << 50, false, refused},
		{"7EiB", 7 << 60, false, refused},
		{"512MB", 512e6, false, 512e6},
		{"512 MB", 512e6, false, 512e6},
		{"80GB", 80e9, false, 80e9},
		{"1KB", 1000, false, 1000},
		{"2TB", 2e12, false, 2e12},
		{"1.5B", 1, false, 1},
		// The bare suffixes: powers of 1024 now, as --gpu read them.
		{"24G", 24 << 30, true, 24 << 30},
		{"16g", 16 << 30, true, 16 << 30},
		{"100M", 100 << 20, true, 100 << 20},
		{"64K", 64 << 10, true, 64 << 10},
		{"0.5k", 512, true, 512},
		{"1T", 1 << 40, true, 1 << 40},
		{"2P", 2 << 50, true, refused},
		{"1E", 1 << 60, true, refused},
		// Refused by both, or by the new grammar.
		{"-1GiB", refused, false, refused},
		{"20 jiggabytes", refused, false, refused},
		{"", refused, false, refused},
		{"GiB", refused, false, refused},
		{"1.5.2G", refused, false, refused},
		{"8EiB", refused, false, refused}, // 2⁶³: past int64
		{"99999999999999999999", refused, false, refused},
		{"1e3", refused, false, 1000}, // estimate's float syntax: E is a unit now
	} {
		got, err := ParseBytes(c.in)
		switch {
		case c.want == refused && err == nil:
			t.Errorf("ParseBytes(%q) = %d, want an error", c.in, got)
		case c.want != refused && (err != nil || got != c.want):
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
		if old, herr := humanize.ParseBytes(c.in); herr == nil && old <= math.MaxInt64 && c.want != refused {
			if changed := int64(old) != c.want; changed != c.flagsChanged {
				t.Errorf("%q: humanize read %d, now %d: flagsChanged should be %v", c.in, old, c.want, changed)
			}
		} else if c.flagsChanged {
			t.Errorf("%q: humanize refused it, so it cannot have changed meaning", c.in)
		}
		if c.gpuOld != refused && c.want != refused && c.gpuOld != c.want {
			t.Errorf("%q: --gpu read %d, now %d", c.in, c.gpuOld, c.want)
		}
	}
	if _, err := ParseBytes("-5MiB"); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("a negative size: %v, want an error that says negative", err)
	}
}

func TestParseCount(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int64
	}{{"7B", 7e9}, {"6.7b", 6.7e9}, {"124M", 124e6}, {"350k", 350e3}, {"1.2T", 1.2e12},
		{"6,738,415,616", 6738415616}, {"6_738_415_616", 6738415616}} {
		if got, err := ParseCount(tc.s); err != nil || got != tc.want {
			t.Errorf("ParseCount(%q) = %d, %v; want %d", tc.s, got, err, tc.want)
		}
	}
	for _, s := range []string{"", "B", "-7B", "seven", "NaNB", "1e30"} {
		if _, err := ParseCount(s); err == nil {
			t.Errorf("ParseCount(%q) accepted", s)
		}
	}
}
