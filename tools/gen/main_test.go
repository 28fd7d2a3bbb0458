package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// TestDemoFileMatchesGenerator keeps the shipped demo snapshot in step with
// the simulator that made it (make demo-file rewrites it).
func TestDemoFileMatchesGenerator(t *testing.T) {
	want, err := os.ReadFile(st.RepoFile("testdata", "demo", "oom_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"demo"}, &out, &errOut); code != 0 || !bytes.Equal(out.Bytes(), want) {
		t.Errorf("gen demo (exit %d, %s) differs from testdata/demo/oom_snapshot.pickle: run make demo-file", code, errOut.String())
	}
}

// TestGenArguments: each scenario writes where -o says, flags go before or
// after the scenario, and a bad command line is one line and exit 2.
func TestGenArguments(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	big := filepath.Join(dir, "big.pickle")
	if code := run([]string{"-size", "256K", "big", "-o", big, "-q"}, &out, &errOut); code != 0 || errOut.Len() != 0 {
		t.Fatalf("gen big: exit %d, %s", code, errOut.String())
	}
	// 256K is 256 KiB (units.ParseBytes); the generator stops at the first
	// entry past its target.
	if fi, err := os.Stat(big); err != nil || fi.Size() < 256<<10 || fi.Size() > 320<<10 {
		t.Errorf("gen big --size 256K wrote %v bytes (%v), want about 256 KiB", fi.Size(), err)
	}
	job := filepath.Join(dir, "job")
	if code := run([]string{"faultyjob", "-o", job}, &out, &errOut); code != 0 {
		t.Fatalf("gen faultyjob: exit %d, %s", code, errOut.String())
	}
	if m, _ := filepath.Glob(filepath.Join(job, "oom_snapshot_rank*.pickle")); len(m) != 8 {
		t.Errorf("gen faultyjob wrote %d ranks, want 8", len(m))
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "gen: want a scenario"},
		{[]string{"lunch"}, `gen: unknown scenario "lunch"`},
		{[]string{"big", "--size", "-1G"}, `gen: big --size "-1G": want a size like 20GiB, not a negative number`},
		{[]string{"faultyjob"}, "gen: faultyjob: -o FOLDER is required"},
		{[]string{"demo", "extra"}, `gen: unexpected argument "extra"`},
		{[]string{"demo", "--colour"}, "gen: flag provided but not defined: -colour"},
	} {
		out.Reset()
		errOut.Reset()
		code := run(c.args, &out, &errOut)
		if code != 2 || out.Len() != 0 || strings.Count(errOut.String(), "\n") != 1 || !strings.HasPrefix(errOut.String(), c.want) {
			t.Errorf("gen %q: exit %d, stdout %d bytes, stderr %q; want exit 2 and one line %q", c.args, code, out.Len(), errOut.String(), c.want)
		}
	}
}
