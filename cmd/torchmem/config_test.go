package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCheckConfigBounds: --config files past the bounds end in one line
// and exit 2, reading at most 1 MiB: /dev/zero crashed out of memory, 40,000
// keys took 2.1 s (the YAML decoder's duplicate-key checks), aliases
// expand exponentially.
func TestCheckConfigBounds(t *testing.T) {
	dir := t.TempDir()
	var many strings.Builder
	many.WriteString("budgets:\n")
	for i := range 40_000 {
		fmt.Fprintf(&many, "  k%d: 1GiB\n", i)
	}
	laughs := "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
	cases := []struct {
		name, path, want string
	}{
		{"40k keys", writeTemp(t, dir, "many.yaml", []byte(many.String())), "more than 1000 keys and values"},
		{"2 MiB", writeTemp(t, dir, "big.yaml", []byte("budgets: {peak: 1GiB}\n"+strings.Repeat("# padding\n", 200_000))), "larger than 1048576 bytes"},
		{"aliases", writeTemp(t, dir, "laughs.yaml", []byte(laughs)), "YAML aliases (*a) are not supported"},
		{"unknown key", writeTemp(t, dir, "unknown.yaml", []byte("budget: {peak: 1GiB}\n")), "field budget not found"},
		{"bad YAML over lines", writeTemp(t, dir, "bad.yaml", []byte("budgets:\n  peak: [1,\n")), "--config"},
		{"control characters", writeTemp(t, dir, "ctl.yaml", []byte("budgets: {\"\\e[31mpeak\": 1GiB}\n")), `unknown budget "\x1b[31mpeak"`},
		{"a folder", dir, "is a directory"},
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		cases = append(cases, struct{ name, path, want string }{"/dev/zero", "/dev/zero", "larger than 1048576 bytes"})
	}
	gate := filepath.Join(repoRoot(), "testdata", "gate", "base.json")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var code int
			var stderr string
			var a, b runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&a)
			code, _, stderr = runCLI(nil, "check", gate, "--config", c.path)
			runtime.ReadMemStats(&b)
			if code != exitInput || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want one line with %q", code, stderr, c.want)
			}
			if strings.Contains(stderr, "\x1b") {
				t.Errorf("raw escape in %q", stderr)
			}
			if n := b.TotalAlloc - a.TotalAlloc; n > 64<<20 {
				t.Errorf("allocated %d bytes", n)
			}
		})
	}
	// A real config still works.
	ok := writeTemp(t, dir, "ok.yaml", []byte("budgets: {peak: 100GiB, activation: 80GiB, \"phase:forward\": 90GiB}\ntolerance: 5%\n"))
	if code, _, stderr := runCLI(nil, "check", gate, "--config", ok); code != exitOK {
		t.Errorf("a real config: exit %d: %s", code, stderr)
	}
}

// FuzzCheckConfig: any --config file ends in a config or one line of
// error (an *exitError of exit 2), never a panic.
func FuzzCheckConfig(f *testing.F) {
	for _, s := range []string{
		"budgets: {peak: 20GiB, activation: 8GiB, growth_per_step: 0, \"phase:forward\": 12GiB}\nbaseline: base.json\ntolerance: 5%\ndevice: 0\nallow_oom: true\n",
		"a: &a [x, x]\nb: [*a, *a]\n",
		"budgets:\n  peak: [1,\n",
		"--- \n...\n",
		"budgets: !!binary aGVsbG8=\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := readCheckConfig(p)
		if err == nil {
			return
		}
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitInput {
			t.Fatalf("error %T %v", err, err)
		}
		if msg := err.Error(); strings.ContainsAny(msg, "\r\n") || strings.Contains(msg, "\x1b") {
			t.Fatalf("error is not one inert line: %q", msg)
		}
	})
}

// BenchmarkReadCheckConfig reads configs of k budget keys: the YAML
// decoder's work grows with the square of a mapping's keys (40,000 keys
// took 2.1 s), and the node cap (1,000 keys and values) keeps it to the
// cost of 498; past the cap the file is refused after a linear pass.
func BenchmarkReadCheckConfig(b *testing.B) {
	dir := b.TempDir()
	for _, k := range []int{498, 4_998, 40_000} {
		var c strings.Builder
		c.WriteString("budgets:\n")
		for i := range k {
			fmt.Fprintf(&c, "  k%d: 1GiB\n", i)
		}
		p := filepath.Join(dir, fmt.Sprint(k, ".yaml"))
		if err := os.WriteFile(p, []byte(c.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprint("keys=", k), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, err := readCheckConfig(p)
				if (err == nil) != (2*k+4 <= maxConfigNodes) {
					b.Fatalf("%d keys: %v", k, err)
				}
			}
		})
	}
}
