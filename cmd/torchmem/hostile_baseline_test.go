package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/snapshottest"
)

// TestHostileBaselines: baselines a stranger can hand to diff and check.
// Strings print inert (exit 0 for diff); a negative or absurd figure is bad
// input (exit 2, one line), where a baseline peak of −9·10^18 passed
// check --tolerance 5%; any amount of whitespace before the JSON is read.
func TestHostileBaselines(t *testing.T) {
	dir := t.TempDir()
	base, err := os.ReadFile(gateFile("base.json"))
	if err != nil {
		t.Fatal(err)
	}
	good := writeTemp(t, dir, "good.json", base)
	for _, s := range []string{"\x1b[31m\a", "::error::pwned", "<img src=x onerror=alert(1)>", "\x9b31m\x9d\x9c", "\xff\xfe"} {
		// Text strings; the words (phases, the format) are checked against
		// their vocabulary instead (TestMergeHostileStrings).
		js := strings.Replace(string(base), `"generation": "E (2.5–2.7)"`, `"generation": `+rawJSONString(s), 1)
		js = strings.Replace(js, `"recording": "alloc and free"`, `"recording": `+rawJSONString(s), 1)
		js = strings.Replace(js, `"site": "model.py:64 attention"`, `"site": `+rawJSONString(s), -1)
		js = strings.Replace(js, `"kind": "step_growth"`, `"kind": `+rawJSONString(s), -1)
		p := writeTemp(t, dir, "hostile.json", []byte(js))
		for _, format := range []string{"text", "markdown"} {
			code, out, stderr := runCLI(nil, "diff", "--format", format, p, good)
			if code != exitOK {
				t.Fatalf("diff %q: exit %d: %s", s, code, stderr)
			}
			if !strings.Contains(js, rawJSONString(s)) {
				t.Fatalf("the hostile string is not in the baseline")
			}
			if why := snapshottest.NotInert(out, format == "markdown"); why != "" {
				t.Errorf("diff --format %s of %q: %s", format, s, why)
			}
		}
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"negative peak", `"allocated_bytes": `, `"allocated_bytes": -9000000000000000000, "x": `, "is -9000000000000000000 bytes"},
		{"absurd peak", `"allocated_bytes": `, `"allocated_bytes": 9000000000000000000, "x": `, "is 9000000000000000000 bytes"},
	} {
		js := strings.Replace(string(base), c.from, c.to, 1)
		p := writeTemp(t, dir, "absurd.json", []byte(js))
		code, _, stderr := runCLI(nil, "check", good, "--baseline", p, "--tolerance", "5%")
		if code != exitInput || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q", c.name, code, stderr)
		}
	}
	spaced := writeTemp(t, dir, "spaced.json", append(bytes.Repeat([]byte(" \n"), 64<<10), base...))
	if code, _, stderr := runCLI(nil, "diff", spaced, good); code != exitOK {
		t.Errorf("128 KiB of whitespace before the JSON: exit %d: %s", code, stderr)
	}
}

// rawJSONString quotes s for JSON, keeping bytes that are not UTF-8 as they
// are (a file can hold them).
func rawJSONString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[c>>4])
			b.WriteByte("0123456789abcdef"[c&15])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
