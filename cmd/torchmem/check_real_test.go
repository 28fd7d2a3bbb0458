package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// realOOMs are the real files with an oom trace entry, and its device, as
// testdata/facts/snapshot_facts.py counts them with Python's own pickle
// (snapshot/realfiles_table_test.go holds the full facts). No real chrome trace
// has one. record_oom's two dumps (the OOM observer's and the one at exit)
// hold the same oom entry, event 619 of device 0.
var realOOMs = map[string]int{
	"genC_torch2.2_nesta_OOM_pickle_named_json.pickle":        0,
	"genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle": 1,
	"oom_snapshot_rank0_590.pickle":                           0,
	"snapshot_rank0_590.pickle":                               0,
}

// TestCheckEveryRealFile: check fails on exactly the real files that ran
// out of memory, whatever the budgets, with the OOM check listed first and
// naming the device; --allow-oom lets them pass; diff agrees (it says the
// new run ran out of memory exactly when check fails on it).
func TestCheckEveryRealFile(t *testing.T) {
	files := st.SharedInputs(t)
	base := shared(t, "snapshots", "nothanmin_fullstep.pickle")
	nOOM := 0
	for _, f := range files {
		name := filepath.Base(f)
		dev, oom := realOOMs[name]
		if oom {
			nOOM++
		}
		t.Run(name, func(t *testing.T) {
			code, out, stderr := runCLI(nil, "check", f, "--budget", "peak=100GiB", "--budget", "leaks=100")
			lines := strings.Split(out, "\n")
			first := ""
			for _, l := range lines[1:] {
				if strings.HasPrefix(l, "  pass  ") || strings.HasPrefix(l, "  fail  ") || strings.HasPrefix(l, "  skip  ") {
					first = l
					break
				}
			}
			switch {
			case oom:
				want := fmt.Sprintf("  fail  device %d: Out of memory in ", dev)
				if code != exitFailed || !strings.HasPrefix(first, want) || !strings.Contains(stderr, "check failed: 1 of") {
					t.Errorf("exit %d, first check %q, want %q\n%s%s", code, first, want, out, stderr)
				}
				code, out, _ = runCLI(nil, "check", "--allow-oom", f, "--budget", "peak=100GiB")
				if code != exitOK || !strings.Contains(out, fmt.Sprintf("  skip  device %d (allowed by --allow-oom): Out of memory", dev)) {
					t.Errorf("--allow-oom: exit %d\n%s", code, out)
				}
			case code != exitOK || strings.Contains(out, "Out of memory"):
				t.Errorf("no OOM in this file: exit %d\n%s%s", code, out, stderr)
			case strings.Contains(first, "no device memory in this file"): // nothing to run out of
			case !strings.Contains(first, "did not run out of memory") && !strings.Contains(first, "no device ran out of memory"):
				t.Errorf("first check %q is not the OOM check", first)
			}
			// diff agrees: against a run without an OOM as the base, it
			// says the new run ran out of memory exactly when check fails.
			code, text, _ := runCLI(nil, "diff", base, f)
			if want := fmt.Sprintf("Device %d: the new run ran out of memory", dev); code != exitOK || oom != strings.Contains(text, want) {
				t.Errorf("diff: exit %d, says %q; OOM %v", code, strings.SplitN(text, "\n", 5)[3], oom)
			}
		})
	}
	if nOOM != len(realOOMs) {
		t.Errorf("%d of the %d OOM files found", nOOM, len(realOOMs))
	}
}
