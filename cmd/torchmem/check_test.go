package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/result"
)

// machineFree cuts the testdata/gate folder from paths in an output.
func machineFree(s string) string { return strings.ReplaceAll(s, gateDir(), "") }

func TestCheckGolden(t *testing.T) {
	cfg := []string{"check", "--config", gateFile("torchmem.yaml"), gateFile("new.json")}
	cases := []struct {
		golden string
		args   []string
		code   int
	}{
		{"gate/check_config.txt", cfg, exitFailed},
		{"gate/check_config.md", append(cfg, "--format", "markdown"), exitFailed},
		{"gate/check_config.json", append(cfg, "--format", "json"), exitFailed},
		{"gate/check_pass.txt", []string{"check", "-b", "peak=20GiB", "-b", "phase:forward=10GiB", "-b", "leaks=0", "-b", "phase:zero_grad=1GiB",
			"--baseline", gateFile("base.json"), gateFile("base.json")}, exitOK},
		{"gate/check_pass.md", []string{"check", "-f", "markdown", "-b", "peak=20GiB", gateFile("base.json")}, exitOK},
		{"gate/check_two_files.txt", []string{"check", "-b", "peak=10GiB", "--device", "0", gateFile("base.json"), gateFile("new.json")}, exitFailed},
		{"gate/check_two_files.json", []string{"check", "-f", "json", "-b", "peak=10GiB", "--device", "0", gateFile("base.json"), gateFile("new.json")}, exitFailed},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			code, out, stderr := runCLI(nil, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, stderr)
			}
			golden(t, c.golden, machineFree(out))
		})
	}
}

func TestCheckExitCodes(t *testing.T) {
	dir := t.TempDir()
	base, new := gateFile("base.json"), gateFile("new.json")
	absBase, err := filepath.Abs(base) // a config's relative paths start at the config's folder
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(name, text string) string { return writeTemp(t, dir, name, []byte(text)) }
	cases := []struct {
		name string
		args []string
		code int
		want string // in stdout for exit 0 and 1, in the one-line error for 2
	}{
		{"an OOM fails, within budget or not", []string{"check", "--budget", "peak=100GiB", new}, exitFailed,
			"FAIL: 1 of 3 checks failed (2 passed, 0 skipped)\n  fail  device 1: Device 1 ran out of memory in forward"},
		{"the OOM check alone", []string{"check", new}, exitFailed, "  fail  device 1: Device 1 ran out of memory in forward: 2.0 GiB requested with 512 MiB free.\n"},
		{"an OOM on a device not checked", []string{"check", "-d", "0", new}, exitOK, "PASS: 1 check passed\n  pass  device 0 did not run out of memory\n"},
		{"OOM allowed", []string{"check", "--allow-oom", "--budget", "peak=11GiB", new}, exitOK,
			"PASS: 2 of 3 checks passed, 1 skipped\n  skip  device 1 (allowed by --allow-oom): Device 1 ran out of memory"},
		{"OOM allowed in the config", []string{"check", "--config", cfg("allow.yaml", "allow_oom: true\n"), new}, exitInput, "nothing to check: with --allow-oom"},
		{"over budget", []string{"check", "--allow-oom", "--budget", "peak=10GiB", new}, exitFailed,
			"fail  device 0: peak allocated 11.0 GiB (in optimizer, step 2) is over the budget of 10.0 GiB by\n        1.00 GiB\n" +
				"        largest: adamw.py:174 _init_group 4.00 GiB\n"},
		{"category over budget", []string{"check", "--budget", "activation=2GiB", "--device", "0", new}, exitFailed, "activation at the peak 2.50 GiB is over the budget"},
		{"phase over budget", []string{"check", "--budget", "phase:backward=10GiB", "-d", "0", new}, exitFailed, "peak in backward 10.5 GiB is over the budget"},
		{"end over budget", []string{"check", "--budget", "end=8GiB", "-d", "0", new}, exitFailed, "allocated at the end 8.06 GiB is over the budget of 8.00 GiB by 64.0 MiB"},
		{"leak growth", []string{"check", "--budget", "growth_per_step=16MiB", "-d", "0", new}, exitFailed, "memory growth per step 32.0 MiB (growing_list at train.py:120 <module>, medium\n        confidence)"},
		{"leaks counted", []string{"check", "--budget", "leaks=0", "-d", "0", new}, exitFailed, "1 medium/high-confidence leak (growing_list"},
		{"low-confidence leaks do not count", []string{"check", "--budget", "leaks=1", "-d", "0", new}, exitOK, "1 medium/high-confidence leak (growing_list at train.py:120 <module>), within the\n        budget of 1"},
		{"baseline within tolerance", []string{"check", "--baseline", base, "--tolerance", "70%", "-d", "0", new}, exitOK, "PASS: 10 of 12 checks passed, 2 skipped"},
		{"baseline regression", []string{"check", "--baseline", base, "--tolerance", "5%", "-d", "0", new}, exitFailed,
			"peak allocated grew vs the baseline: 10.0 GiB → 11.0 GiB (+10.0%), more than the\n        5% tolerance and the 102 MiB noise floor (at most 10.5 GiB)\n" +
				"        grew most: model.py:70 forward | mlp 0 B → 768 MiB (+768 MiB)\n" +
				"                   model.py:60 forward 1.00 GiB → 1.25 GiB (+256 MiB)\n"},
		{"absolute tolerance", []string{"check", "--baseline", base, "--tolerance", "1GiB", "-d", "0", new}, exitOK, "within the 1.00 GiB tolerance"},
		// The noise floor: 1% of the baseline's 10 GiB peak (102 MiB) by
		// default. The activations grew by exactly 1.00 GiB (1.50 → 2.50
		// GiB): a floor of 1 GiB lets them pass, one of 1023 MiB not.
		{"default noise floor", []string{"check", "--baseline", base, "-d", "0", new}, exitFailed,
			"  baseline ../../testdata/gate/base.json, tolerance 0%, noise floor the larger of 16.0 MiB and 1% of\n    the baseline's peak\n"},
		{"growth under the floor passes", []string{"check", "--baseline", base, "--floor", "1GiB", "-d", "0", new}, exitOK,
			"activation at the optimizer peak vs the baseline: 1.50 GiB → 2.50 GiB (+66.7%),\n        under the 1.00 GiB noise floor\n"},
		{"growth over the floor fails", []string{"check", "--baseline", base, "--floor", "1023MiB", "-d", "0", new}, exitFailed,
			"activation at the optimizer peak grew vs the baseline: 1.50 GiB → 2.50 GiB\n        (+66.7%), more than the 0% tolerance and the 1023 MiB noise floor (at most 2.50 GiB)\n"},
		{"floor as a share of the peak", []string{"check", "--baseline", base, "--floor", "10%", "-d", "0", new}, exitOK,
			"noise floor 10% of the baseline's peak\n"},
		{"floor 0 counts every byte", []string{"check", "--baseline", base, "--floor", "0", "--tolerance", "7.2%", "-d", "0", new}, exitFailed,
			"  baseline ../../testdata/gate/base.json, tolerance 7.2%\n"},
		{"floor in the config", []string{"check", "--config", cfg("floor.yaml", "baseline: "+absBase+"\nfloor: 2GiB,1%\ndevice: 0\n"), new}, exitOK,
			// The line holds the baseline's absolute path: it wraps where the checkout's path length puts it.
			"noise floor the larger of 2.00 GiB and 1% of the baseline's peak"},
		{"default tolerance is 0", []string{"check", "--baseline", base, base}, exitOK, "within the 0% tolerance"},
		{"config", []string{"check", "--config", gateFile("torchmem.yaml"), new}, exitFailed, "FAIL: 9 of 17 checks failed"},
		{"flags override the config", []string{"check", "--config", gateFile("torchmem.yaml"), "--budget", "activation=3GiB", "--tolerance", "70%", "--budget", "phase:forward=11GiB",
			"--budget", "growth_per_step=1GiB", "--budget", "leaks=1", new}, exitOK, "PASS: 15 of 17 checks passed, 2 skipped"},
		{"config with numbers", []string{"check", "--config", cfg("numbers.yaml", "budgets:\n  peak: 11811160064\n  growth_per_step: 33554432\ntolerance: 10\nbaseline: "+absBase+"\ndevice: 1\nallow_oom: true\n"), new}, exitOK,
			"device 1 ran out of memory (see the out-of-memory check) and is not in the baseline"},
		{"empty config and a budget", []string{"check", "--config", cfg("empty.yaml", ""), "-b", "peak=1TiB", "-d", "0", new}, exitOK, "PASS"},

		{"unknown budget", []string{"check", "--budget", "vram=1GiB", new}, exitInput, `--budget: unknown budget "vram": want one of peak, end, parameter`},
		{"bad size", []string{"check", "--budget", "peak=20 gigs", new}, exitInput, `--budget: budget peak="20 gigs": want a size like 20GiB`},
		{"no equals", []string{"check", "--budget", "peak", new}, exitInput, "want KEY=VALUE"},
		{"bad tolerance", []string{"check", "--baseline", base, "--tolerance", "a bit", new}, exitInput, `--tolerance: tolerance "a bit"`},
		{"absurd tolerance", []string{"check", "--baseline", base, "--tolerance", "1e308%", new}, exitInput,
			`--tolerance: tolerance "1e308%": want a percentage from 0% to 1000% like 5% (more lets a measure grow 11-fold: set a --budget instead)`},
		{"tolerance past float64", []string{"check", "--baseline", base, "--tolerance", "1e400", new}, exitInput, `--tolerance: tolerance "1e400": want a percentage from 0%`},
		{"tolerance past 1 PiB", []string{"check", "--baseline", base, "--tolerance", "2PiB", new}, exitInput, `(at most 1 PiB)`},
		{"bad floor", []string{"check", "--baseline", base, "--floor", "some", new}, exitInput, `--floor: floor "some": want a size like 16MiB`},
		{"floor over 100%", []string{"check", "--baseline", base, "--floor", "150%", new}, exitInput, `--floor: floor "150%": want a percentage of the peak from 0% to 100%`},
		{"floor with two sizes", []string{"check", "--baseline", base, "--floor", "1MiB,2MiB", new}, exitInput, `give at most one size and one percentage`},
		{"bad floor in the config", []string{"check", "--config", cfg("badfloor.yaml", "floor: -1%\n"), "--baseline", base, new}, exitInput, `--floor: floor "-1%"`},
		{"nothing to check", []string{"check", "--allow-oom", new}, exitInput, "nothing to check: with --allow-oom, give --budget, --baseline or --config"},
		{"update-baseline without a baseline", []string{"check", "--update-baseline", new}, exitInput, "--update-baseline: give one FILE and the --baseline path"},
		{"update-baseline of two files", []string{"check", "--update-baseline", "--baseline", filepath.Join(dir, "b.json"), new, base}, exitInput, "--update-baseline: give one FILE"},
		{"missing file", []string{"check", "-b", "peak=1GiB", filepath.Join(dir, "nope.pickle")}, exitInput, "nope.pickle: no such file or directory"},
		{"missing baseline", []string{"check", "--baseline", filepath.Join(dir, "nope.json"), new}, exitInput, "nope.json: no such file or directory"},
		{"baseline not an analysis", []string{"check", "--baseline", cfg("x.json", `{"schema":"torchmem.check/v1"}`), new}, exitInput, "schema torchmem.check/v1 is not an analysis"},
		{"no such device", []string{"check", "-b", "peak=1GiB", "--device", "4", new}, exitInput, "no device 4 in"},
		{"missing config", []string{"check", "--config", filepath.Join(dir, "nope.yaml"), new}, exitInput, "--config: open"},
		{"config unknown key", []string{"check", "--config", cfg("typo.yaml", "budget:\n  peak: 1GiB\n"), new}, exitInput, "field budget not found"},
		{"config bad budget", []string{"check", "--config", cfg("bad.yaml", "budgets: {peak: lots}\n"), new}, exitInput, `budget peak="lots"`},
		{"config unknown budget", []string{"check", "--config", cfg("bad2.yaml", "budgets: {activations: 1GiB}\n"), new}, exitInput, `unknown budget "activations"`},
		{"config not YAML", []string{"check", "--config", cfg("bad3.yaml", "budgets: [peak\n"), new}, exitInput, "--config"},
		{"config bad device", []string{"check", "--config", cfg("bad4.yaml", "device: first\n"), "-b", "peak=1GiB", new}, exitInput, "cannot construct !!str `first` into int"},
		{"junit unwritable", []string{"check", "-b", "peak=1TiB", "--junit", filepath.Join(dir, "no", "such", "dir.xml"), new}, exitInput, "--junit: open"},
		{"bad format", []string{"check", "-f", "html", "-b", "peak=1GiB", new}, exitInput, `--format "html"`},
		{"no file", []string{"check", "-b", "peak=1GiB"}, exitInput, "requires at least 1 arg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(nil, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, c.code, stdout, stderr)
			}
			switch code {
			case exitInput:
				first := strings.SplitN(stderr, "\n", 2)[0]
				if stdout != "" || !strings.HasPrefix(first, "torchmem: ") || !strings.Contains(first, c.want) {
					t.Errorf("stdout %q, stderr %q: want one error line with %q", stdout, stderr, c.want)
				}
			case exitFailed:
				if !containsWrapped(stdout, c.want) || !strings.HasPrefix(stderr, "torchmem: check failed: ") {
					t.Errorf("stdout %q, stderr %q: want %q", stdout, stderr, c.want)
				}
			default:
				if !containsWrapped(stdout, c.want) || stderr != "" {
					t.Errorf("stdout %q, stderr %q: want %q", stdout, stderr, c.want)
				}
			}
		})
	}
}

// TestCheckCIOutputs checks --junit and --github: the annotations on
// stdout, the job summary appended to $GITHUB_STEP_SUMMARY, the JUnit file.
func TestCheckCIOutputs(t *testing.T) {
	dir := t.TempDir()
	summary := filepath.Join(dir, "summary.md")
	if err := os.WriteFile(summary, []byte("earlier step\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GITHUB_STEP_SUMMARY", summary)
	junit := filepath.Join(dir, "torchmem.xml")
	code, out, stderr := runCLI(nil, "check", "--config", gateFile("torchmem.yaml"), "--github", "--junit", junit, gateFile("new.json"))
	if code != exitFailed || stderr != "torchmem: check failed: 9 of 17 checks failed\n" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	golden(t, "gate/check_github.txt", machineFree(out))
	sum, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(sum), "earlier step\n## ❌ torchmem check: `") {
		t.Errorf("summary not appended: %q", sum)
	}
	golden(t, "gate/check_summary.md", machineFree(strings.TrimPrefix(string(sum), "earlier step\n")))
	x, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "gate/check.junit.xml", machineFree(string(x)))
	var suites struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Cases []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(x, &suites); err != nil {
		t.Fatalf("JUnit file is not XML: %v", err)
	}
	failed := 0
	for _, c := range suites.Suites[0].Cases {
		if c.Failure != nil {
			failed++
		}
	}
	if suites.Tests != 17 || suites.Failures != 9 || failed != 9 || len(suites.Suites[0].Cases) != 17 {
		t.Errorf("JUnit: %d tests, %d failures, %d failed cases", suites.Tests, suites.Failures, failed)
	}
	// A passing run writes a ::notice and no ::error.
	code, out, _ = runCLI(nil, "check", "--github", "-b", "peak=1TiB", gateFile("base.json"))
	if code != exitOK || strings.Contains(out, "::error") || !strings.Contains(machineFree(out), "::notice title=torchmem check::base.json: PASS: all 2 checks passed") {
		t.Errorf("exit %d:\n%s", code, machineFree(out))
	}
}

// TestCheckSnapshots runs check on snapshots (analysed on the fly) against
// a baseline written by torchmem analyze, as the README's CI example does.
func TestCheckSnapshots(t *testing.T) {
	dir := t.TempDir()
	small := simSnapshot(t, dir, "small.pickle", 2)
	big := simSnapshot(t, dir, "big.pickle", 4)
	code, js, stderr := runCLI(nil, "analyze", "--format", "json", small)
	if code != exitOK {
		t.Fatalf("analyze: exit %d %s", code, stderr)
	}
	baseline := writeTemp(t, dir, "base.json", []byte(js))
	var base result.Result
	if err := json.Unmarshal([]byte(js), &base); err != nil {
		t.Fatal(err)
	}
	peak := base.Devices[0].Peak.AllocatedBytes
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"same run", []string{"check", small, "--baseline", baseline}, exitOK},
		{"snapshot as the baseline", []string{"check", small, "--baseline", small}, exitOK},
		{"bigger batch", []string{"check", big, "--baseline", baseline, "--tolerance", "5%"}, exitFailed},
		{"peak budget at the peak", []string{"check", small, "--budget", "peak=" + strconv.FormatInt(peak, 10)}, exitOK},
		{"peak budget one byte short", []string{"check", small, "--budget", "peak=" + strconv.FormatInt(peak-1, 10)}, exitFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, stderr := runCLI(nil, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s%s", code, c.code, out, stderr)
			}
		})
	}
}

// TestCheckRealSnapshots checks a real training step against the analysis
// of a smaller one as its baseline: the peak grew, so check fails; against
// itself it passes.
func TestCheckRealSnapshots(t *testing.T) {
	small := shared(t, "snapshots", "nothanmin_fullstep.pickle")
	big := shared(t, "snapshots", "kkaitlyn_ctx128_fullstep.pickle")
	dir := t.TempDir()
	code, js, stderr := runCLI(nil, "analyze", "--format", "json", small)
	if code != exitOK {
		t.Fatalf("analyze: exit %d %s", code, stderr)
	}
	baseline := writeTemp(t, dir, "base.json", []byte(js))
	code, out, _ := runCLI(nil, "check", big, "--baseline", baseline, "--tolerance", "5%", "--budget", "peak=60GiB")
	if code != exitFailed || !strings.Contains(out, "pass  device 0: peak allocated 51.3 GiB (in optimizer, step 1) is within the budget of 60.0 GiB") ||
		!strings.Contains(out, "fail  device 0: peak allocated grew vs the baseline: 21.7 GiB → 51.3 GiB (+136.6%)") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	code, out, _ = runCLI(nil, "check", small, "--baseline", baseline)
	if code != exitOK {
		t.Errorf("against itself: exit %d:\n%s", code, out)
	}
}

// containsWrapped reports whether text holds want; a want of one line
// matches wherever the text's wrapping breaks it, one with line breaks
// asserts the wrapping too.
func containsWrapped(text, want string) bool {
	if strings.Contains(text, want) {
		return true
	}
	return !strings.Contains(want, "\n") && strings.Contains(strings.Join(strings.Fields(text), " "), want)
}
