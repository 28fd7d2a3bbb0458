package snapshottest

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// SecurityBounds reads the table of bounds in the repository's SECURITY.md:
// rows "| what | figure | `pkg.name` |" whose figure is a number (commas
// allowed) with an optional unit (bytes, KiB, MiB, GiB, PiB). It returns
// the figure of each named constant, so that each package's test can
// compare them with its constants and the page cannot drift from the code.
func SecurityBounds(t testing.TB) map[string]int64 {
	t.Helper()
	path := RepoFile("SECURITY.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	units := map[string]int64{"": 1, "bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "PiB": 1 << 50}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 3 {
			continue
		}
		name := strings.TrimSpace(cells[2])
		if !strings.HasPrefix(name, "`") || !strings.HasSuffix(name, "`") {
			continue
		}
		name = strings.Trim(name, "`")
		num, unit, _ := strings.Cut(strings.TrimSpace(cells[1]), " ")
		n, err := strconv.ParseInt(strings.ReplaceAll(num, ",", ""), 10, 64)
		mul, ok := units[unit]
		if err != nil || !ok {
			t.Errorf("SECURITY.md: the figure of %s, %q, is not a number and a unit", name, cells[1])
			continue
		}
		if _, dup := out[name]; dup {
			t.Errorf("SECURITY.md names %s twice", name)
		}
		out[name] = n * mul
	}
	return out
}

// CheckSecurityBounds compares SECURITY.md's figures of the constants named
// with prefix (such as "snapshot.") with want: every constant of want is
// stated, at its value, and the page names no other of prefix.
func CheckSecurityBounds(t testing.TB, prefix string, want map[string]int64) {
	t.Helper()
	doc := SecurityBounds(t)
	for name, v := range want {
		got, ok := doc[prefix+name]
		if !ok {
			t.Errorf("SECURITY.md does not state %s%s (%d)", prefix, name, v)
		} else if got != v {
			t.Errorf("SECURITY.md states %s%s as %d, the code has %d", prefix, name, got, v)
		}
	}
	for name := range doc {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			if _, known := want[rest]; !known {
				t.Errorf("SECURITY.md states %s, which the test of its package does not know", name)
			}
		}
	}
}
