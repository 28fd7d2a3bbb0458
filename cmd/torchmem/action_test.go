//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

// The GitHub Action (action.yml) is run here as the runner runs a
// composite action's step: its env evaluated (${{ inputs.X }} with the
// inputs' defaults, ${{ github.X }}), its run written to a file and run
// with `bash --noprofile --norc -eo pipefail FILE`, with the runner's
// variables (GITHUB_STEP_SUMMARY, GITHUB_OUTPUT, GITHUB_PATH, RUNNER_TEMP,
// RUNNER_OS, RUNNER_ARCH, GITHUB_ACTION_PATH) pointing into the test's
// folders, and a release folder made by make release as the download.

// actionYAML is what the test reads of action.yml.
type actionYAML struct {
	Inputs map[string]struct {
		Default  string `yaml:"default"`
		Required bool   `yaml:"required"`
	} `yaml:"inputs"`
	Runs struct {
		Using string `yaml:"using"`
		Steps []struct {
			ID    string            `yaml:"id"`
			Shell string            `yaml:"shell"`
			Env   map[string]string `yaml:"env"`
			Run   string            `yaml:"run"`
		} `yaml:"steps"`
	} `yaml:"runs"`
}

// actionJob is one job's use of the action: the runner's files.
type actionJob struct {
	work    string   // GITHUB_WORKSPACE, the step's working folder
	path    []string // PATH's folders before the system's
	github  map[string]string
	inputs  map[string]string
	osName  string // RUNNER_OS, default this machine's
	release string // release-url input, unless inputs has one
}

// actionResult is what one run of the step left.
type actionResult struct {
	code                   int
	stdout, stderr         string
	summary, output, paths string // appended to GITHUB_STEP_SUMMARY, GITHUB_OUTPUT, GITHUB_PATH
	temp                   string // RUNNER_TEMP
}

var expression = regexp.MustCompile(`^\$\{\{ (inputs|github)\.([a-z_-]+) \}\}$`)

// systemPath is this machine's PATH without any folder holding a torchmem,
// so that the action finds only the torchmem a test puts there.
func systemPath() []string {
	var dirs []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, "torchmem")); d != "" && err != nil {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// runnerNames are RUNNER_OS and RUNNER_ARCH for this machine.
func runnerNames() (string, string) {
	return map[string]string{"linux": "Linux", "darwin": "macOS"}[runtime.GOOS],
		map[string]string{"amd64": "X64", "arm64": "ARM64"}[runtime.GOARCH]
}

// run runs action.yml's step for the job.
func (j actionJob) run(t *testing.T) actionResult {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var a actionYAML
	if err := yaml.Unmarshal(data, &a); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	if a.Runs.Using != "composite" || len(a.Runs.Steps) != 1 || a.Runs.Steps[0].Shell != "bash" {
		t.Fatalf("action.yml: want a composite action of one bash step, have %+v", a.Runs)
	}
	step := a.Runs.Steps[0]
	if strings.Contains(step.Run, "${{") {
		t.Fatalf("action.yml: the step's run has an expression (an input pasted into code): %q", step.Run)
	}
	for name := range j.inputs {
		if _, ok := a.Inputs[name]; !ok {
			t.Fatalf("input %q: action.yml has no such input", name)
		}
	}
	tmp := t.TempDir()
	r := actionResult{temp: filepath.Join(tmp, "runner-temp")}
	files := map[string]string{}
	for _, f := range []string{"summary", "output", "path"} {
		files[f] = filepath.Join(tmp, f)
	}
	runnerOS, runnerArch := runnerNames()
	if j.osName != "" {
		runnerOS = j.osName
	}
	env := []string{
		"HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8",
		"PATH=" + strings.Join(append(slices.Clone(j.path), systemPath()...), string(os.PathListSeparator)),
		"GITHUB_ACTIONS=true", "GITHUB_WORKSPACE=" + j.work, "GITHUB_ACTION_PATH=" + repoRoot(),
		"GITHUB_STEP_SUMMARY=" + files["summary"], "GITHUB_OUTPUT=" + files["output"], "GITHUB_PATH=" + files["path"],
		"RUNNER_TEMP=" + r.temp, "RUNNER_OS=" + runnerOS, "RUNNER_ARCH=" + runnerArch,
	}
	for k, v := range step.Env {
		m := expression.FindStringSubmatch(v)
		if m == nil {
			t.Fatalf("action.yml: env %s=%q is not one ${{ inputs.X }} or ${{ github.X }}", k, v)
		}
		if m[1] == "github" {
			env = append(env, k+"="+j.github[m[2]])
			continue
		}
		in, ok := a.Inputs[m[2]]
		if !ok {
			t.Fatalf("action.yml: env %s names the input %s, which it does not declare", k, m[2])
		}
		val, given := j.inputs[m[2]]
		if m[2] == "release-url" && !given {
			val, given = j.release, true
		}
		if !given {
			if in.Required {
				t.Fatalf("the required input %s is not given", m[2])
			}
			val = in.Default
		}
		env = append(env, k+"="+val)
	}
	script := filepath.Join(tmp, "step.sh")
	if err := os.WriteFile(script, []byte(step.Run), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", script)
	cmd.Dir, cmd.Env = j.work, env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatal(err)
	}
	r.code, r.stdout, r.stderr = cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	read := func(p string) string { b, _ := os.ReadFile(p); return string(b) }
	r.summary, r.output, r.paths = read(files["summary"]), read(files["output"]), read(files["path"])
	return r
}

// needCurl skips a test that fetches with the action's script (curl reads
// the file:// release folders) where curl is missing; CI installs it and
// sets TORCHMEM_REQUIRE_SHARED, so there it fails instead.
func needCurl(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("TORCHMEM_REQUIRE_SHARED") != "" {
			t.Fatal("curl is required to run the action's script")
		}
		t.Skip("no curl")
	}
}

// fakeRelease is a release folder as make release writes it, for this
// machine only: torchmem-VERSION-OS-ARCH and SHA256SUMS.
func fakeRelease(t *testing.T, version string) (dir, binary string) {
	t.Helper()
	needCurl(t)
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	dir = t.TempDir()
	cmd := exec.Command("make", "-s", "release", "DIST="+dir, "VERSION="+version, "PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH)
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	return dir, filepath.Join(dir, "torchmem-"+version+"-"+runtime.GOOS+"-"+runtime.GOARCH)
}

// workflowStep returns the step of the README's workflow that uses the
// action: the ref it is used at, and its inputs.
func workflowStep(t *testing.T) (string, map[string]string) {
	t.Helper()
	var wf struct {
		Jobs map[string]struct {
			Steps []struct {
				Uses string            `yaml:"uses"`
				With map[string]string `yaml:"with"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal([]byte(strings.Join(readmeBlock(t, "workflow"), "\n")), &wf); err != nil {
		t.Fatalf("README workflow: %v", err)
	}
	for _, job := range wf.Jobs {
		for _, s := range job.Steps {
			if repo, ref, ok := strings.Cut(s.Uses, "@"); ok && strings.HasSuffix(repo, "/torchmem") {
				return ref, s.With
			}
		}
	}
	t.Fatal("the README's workflow has no step that uses torchmem's action")
	return "", nil
}

// TestActionREADME runs the action's step as the README's workflow uses it,
// against a release of the version it names, on the walk-through's real
// snapshots: on main the same step with update-baseline writes the
// baseline; the unchanged run passes; the run with twice the sequence
// length fails with the job summary the README shows; the next step of the
// job finds torchmem on its PATH.
func TestActionREADME(t *testing.T) {
	base := shared(t, "snapshots", "wedsonlin_medium_128_training.pickle")
	changed := shared(t, "snapshots", "wedsonlin_medium_256_training.pickle")
	ref, with := workflowStep(t)
	release, _ := fakeRelease(t, ref)
	work := t.TempDir()
	if err := os.Mkdir(filepath.Join(work, "ci"), 0o755); err != nil {
		t.Fatal(err)
	}
	record := func(src string) {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, "memory.pickle"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	job := actionJob{work: work, inputs: with, release: "file://" + release,
		github: map[string]string{"action_repository": "torchmem/torchmem", "action_ref": ref}}
	bin := func(r actionResult) string {
		return filepath.Join(r.temp, "torchmem-"+ref+"-"+runtime.GOOS+"-"+runtime.GOARCH, "torchmem")
	}

	record(base)
	onMain := job
	onMain.inputs = map[string]string{"update-baseline": "true"}
	for k, v := range with {
		onMain.inputs[k] = v
	}
	r := onMain.run(t)
	if _, err := os.Stat(filepath.Join(work, "ci", "memory-baseline.json")); r.code != 0 || err != nil {
		t.Fatalf("update-baseline: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	want := []string{"torchmem: fetching file://" + release + "/torchmem-" + ref + "-" + runtime.GOOS + "-" + runtime.GOARCH + "\n",
		"torchmem: torchmem " + ref + " (commit "}
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("the log lacks %q:\n%s", w, r.stdout)
		}
	}

	r = job.run(t)
	if r.code != 0 || !strings.HasPrefix(r.summary, "## ✅ torchmem check: `memory.pickle`\n") || r.output != "torchmem="+bin(r)+"\nexit-code=0\n" {
		t.Errorf("unchanged run: exit %d, output %q, summary:\n%s\nlog:\n%s%s", r.code, r.output, r.summary, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(work, "torchmem-junit.xml")); err != nil {
		t.Errorf("junit: %v", err)
	}

	record(changed)
	r = job.run(t)
	if r.code != 1 || r.output != "torchmem="+bin(r)+"\nexit-code=1\n" || !strings.Contains(r.stdout, "\n::error ") {
		t.Errorf("changed run: exit %d, output %q\n%s%s", r.code, r.output, r.stdout, r.stderr)
	}
	checkExcerpt(t, "output action summary", r.summary)

	// The workflow's next step, "Explain what changed", runs torchmem diff
	// from the PATH the action extended.
	if r.paths != filepath.Dir(bin(r))+"\n" {
		t.Fatalf("GITHUB_PATH: %q, want the binary's folder", r.paths)
	}
	summary := filepath.Join(t.TempDir(), "summary")
	explain := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
		`torchmem diff --format markdown ci/memory-baseline.json memory.pickle >> "$GITHUB_STEP_SUMMARY"`)
	explain.Dir = work
	explain.Env = []string{"PATH=" + strings.Join(append([]string{filepath.Dir(bin(r))}, systemPath()...), ":"), "GITHUB_STEP_SUMMARY=" + summary}
	out, err := explain.CombinedOutput()
	diff, _ := os.ReadFile(summary)
	if err != nil || !strings.HasPrefix(string(diff), "## torchmem diff: `memory-baseline.json` → `memory.pickle`\n") {
		t.Errorf("torchmem diff step: %v %s\n%s", err, out, diff)
	}
}

// TestActionFetch: how the action finds torchmem, and what it refuses. A
// binary whose SHA-256 is not the one SHA256SUMS lists is never run (nor
// installed, nor put on the PATH); a torchmem on the PATH is used when no
// version is asked for; the bad inputs are one ::error line and exit 2.
func TestActionFetch(t *testing.T) {
	const version = "v9.9.9-test"
	release, binary := fakeRelease(t, version)
	simulated := simSnapshot(t, t.TempDir(), "memory.pickle", 2)
	name := filepath.Base(binary)
	sums, err := os.ReadFile(filepath.Join(release, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	goodSum := sha256File(t, binary)

	// A release whose binary was changed after SHA256SUMS was written.
	tampered := t.TempDir()
	data, _ := os.ReadFile(binary)
	if err := os.WriteFile(filepath.Join(tampered, name), append(data, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tampered, "SHA256SUMS"), sums, 0o644); err != nil {
		t.Fatal(err)
	}
	badSum := sha256File(t, filepath.Join(tampered, name))
	// A release whose SHA256SUMS does not list the binary.
	unlisted := t.TempDir()
	if err := os.WriteFile(filepath.Join(unlisted, name), data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(unlisted, "SHA256SUMS"), []byte(strings.Repeat("0", 64)+"  torchmem-other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// torchmem on the PATH, as an earlier step installed it.
	onPath := t.TempDir()
	if err := os.WriteFile(filepath.Join(onPath, "torchmem"), data, 0o755); err != nil {
		t.Fatal(err)
	}

	passing := map[string]string{"files": simulated, "budget": "peak=1TiB"}
	with := func(extra ...string) map[string]string {
		in := map[string]string{}
		for k, v := range passing {
			in[k] = v
		}
		for i := 0; i+1 < len(extra); i += 2 {
			in[extra[i]] = extra[i+1]
		}
		return in
	}
	ref := map[string]string{"action_repository": "torchmem/torchmem", "action_ref": version}
	cases := []struct {
		name    string
		job     actionJob
		code    int
		log     string // the start of a line of stdout
		fetched bool   // the binary is installed and on GITHUB_PATH
		ranks   []string
	}{
		{name: "the release of the action's ref", job: actionJob{github: ref, inputs: passing, release: "file://" + release},
			code: 0, log: "torchmem: torchmem " + version + " (commit ", fetched: true},
		{name: "a version asked for, over the PATH's", job: actionJob{path: []string{onPath}, inputs: with("version", version), release: "file://" + release},
			code: 0, log: "torchmem: fetching file://" + release + "/" + name, fetched: true},
		{name: "the binary was changed", job: actionJob{github: ref, inputs: passing, release: "file://" + tampered},
			code: 2, log: "::error title=torchmem::" + name + ": its SHA-256 is " + badSum + ", but SHA256SUMS says " + goodSum + ": refused, not run"},
		{name: "SHA256SUMS lacks the binary", job: actionJob{github: ref, inputs: passing, release: "file://" + unlisted},
			code: 2, log: "::error title=torchmem::file://" + unlisted + "/SHA256SUMS has no checksum for " + name},
		{name: "no release there", job: actionJob{github: ref, inputs: passing, release: "file://" + t.TempDir()},
			code: 2, log: "::error title=torchmem::could not fetch file://"},
		{name: "torchmem on the PATH", job: actionJob{path: []string{onPath}, github: ref, inputs: passing, release: "file:///nonexistent"},
			code: 0, log: "torchmem: using " + filepath.Join(onPath, "torchmem") + " (torchmem " + version + " (commit "},
		{name: "used at a branch", job: actionJob{github: map[string]string{"action_ref": "main"}, inputs: passing, release: "file://" + release},
			code: 2, log: `::error title=torchmem::no torchmem on the PATH, and this action was used at "main", which is not a release: ` +
				"use it at a release tag (uses: OWNER/torchmem@v1.2.3) or set with: version: v1.2.3"},
		{name: "Windows", job: actionJob{github: ref, inputs: passing, osName: "Windows", release: "file://" + release},
			code: 2, log: "::error title=torchmem::no torchmem release binary for Windows: put torchmem on the PATH first"},
		{name: "not a yes or no", job: actionJob{path: []string{onPath}, inputs: with("allow-oom", "maybe")},
			code: 2, log: `::error title=torchmem::input allow-oom: "maybe" is not true or false`},
		{name: "a glob that matches nothing", job: actionJob{path: []string{onPath}, inputs: with("files", "ranks/*.pickle\n")},
			code: 2, log: "::error title=torchmem::input files: nothing matches ranks/*.pickle"},
		{name: "a glob of ranks", job: actionJob{path: []string{onPath}, inputs: with("files", "  ranks/rank*.pickle  \n\n")},
			ranks: []string{"ranks/rank1.pickle", "ranks/rank0.pickle"},
			code:  0, log: "torchmem: check ranks/rank0.pickle ranks/rank1.pickle --budget peak=1TiB --github"},
		{name: "the tolerance and the floor passed on", job: actionJob{path: []string{onPath}, inputs: with("tolerance", "5%", "floor", "64MiB")},
			code: 0, log: "torchmem: check " + simulated + " --tolerance 5% --floor 64MiB --budget peak=1TiB --github"},
		{name: "a failing check", job: actionJob{path: []string{onPath}, inputs: with("budget", "peak=1MiB\nleaks=0")},
			code: 1, log: "torchmem: check " + simulated + " --budget peak=1MiB --budget leaks=0 --github"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.job.work = t.TempDir()
			snap, _ := os.ReadFile(simulated)
			for _, rank := range c.ranks {
				_ = os.MkdirAll(filepath.Dir(filepath.Join(c.job.work, rank)), 0o755)
				if err := os.WriteFile(filepath.Join(c.job.work, rank), snap, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := c.job.run(t)
			if r.code != c.code || !strings.Contains("\n"+r.stdout, "\n"+c.log) {
				t.Fatalf("exit %d (want %d); stdout lacks %q:\n%s%s", r.code, c.code, c.log, r.stdout, r.stderr)
			}
			installed := filepath.Join(r.temp, name, "torchmem")
			_, err := os.Stat(installed)
			if c.fetched != (err == nil) || c.fetched != (r.paths == filepath.Dir(installed)+"\n") {
				t.Errorf("installed %s: %v, GITHUB_PATH %q; want installed and on the PATH: %v", installed, err, r.paths, c.fetched)
			}
			if c.code == 2 && (r.summary != "" || strings.Contains(r.output, "exit-code")) {
				t.Errorf("a refusal ran torchmem check: summary %q, output %q", r.summary, r.output)
			}
			if c.code != 2 && !strings.Contains(r.output, fmt.Sprintf("exit-code=%d\n", c.code)) {
				t.Errorf("GITHUB_OUTPUT %q lacks exit-code=%d", r.output, c.code)
			}
		})
	}
}
