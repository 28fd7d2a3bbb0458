//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// needVenv returns python3 when it can make virtual environments with pip
// in them (python3 -m venv, with ensurepip), or skips; CI sets
// TORCHMEM_REQUIRE_PYTHON=1 to fail instead.
func needVenv(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(py, "-c", "import venv, ensurepip").Run()
	}
	if err != nil {
		if os.Getenv("TORCHMEM_REQUIRE_PYTHON") != "" {
			t.Fatalf("python3 with venv and ensurepip is required (Debian: python3-venv): %v", err)
		}
		t.Skipf("no python3 that makes virtual environments (python3 -m venv, ensurepip): %v", err)
	}
	return py
}

// venv is a fresh virtual environment.
type venv struct {
	dir string
	env []string // the environment of a shell that activated it
}

// newVenv makes a virtual environment with python3 -m venv. pip reads no
// configuration, asks nothing and reaches no index.
func newVenv(t *testing.T, py string) venv {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(py, "-m", "venv", dir).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv: %v\n%s", err, out)
	}
	v := venv{dir: dir}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "PATH" && k != "PYTHONPATH" && k != "PYTHONHOME" && !strings.HasPrefix(k, "PIP_") && k != "VIRTUAL_ENV" {
			v.env = append(v.env, kv)
		}
	}
	v.env = append(v.env, "VIRTUAL_ENV="+dir, "PATH="+filepath.Join(dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PIP_CONFIG_FILE="+os.DevNull, "PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1",
		"PYTHONNOUSERSITE=1", "PYTHONDONTWRITEBYTECODE=1")
	return v
}

// run runs a command inside the environment (PATH finds its bin/ first)
// and returns its exit status, stdout and stderr.
func (v venv) run(t *testing.T, dir string, extraEnv []string, name string, args ...string) (int, string, string) {
	t.Helper()
	path := name
	if !strings.Contains(name, "/") {
		path = filepath.Join(v.dir, "bin", name)
		if _, err := os.Stat(path); err != nil {
			path = name // not in the environment (yet): the rest of PATH
		}
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(slices.Clone(v.env), extraEnv...)
	cmd.Dir = dir
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("%s: %v", name, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// tree lists a folder's files and links (not folders), relative to it.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestWheelInstall builds the wheel for this machine as a user would (make
// wheels), installs it offline into a fresh virtual environment, and uses
// torchmem from there: the command on the PATH, python -m torchmem, an
// analysis of a real snapshot, and torchmem record started as python -m
// torchmem; then pip uninstall leaves the environment as it was.
func TestWheelInstall(t *testing.T) {
	if (runtime.GOOS != "linux" && runtime.GOOS != "darwin") || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("no wheel for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	py := needVenv(t)
	nesta := st.SharedFile(t, "snapshots", "genC_torch2.2_nesta_OOM_pickle_named_json.pickle")
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	const version = "v9.8.7-3-gabcdef1"
	const pyVersion = "9.8.7.post3+gabcdef1"
	dist := t.TempDir()
	mk := exec.Command("make", "-s", "wheels", "DIST="+dist, "VERSION="+version, "PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH)
	mk.Dir = repoRoot()
	mk.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make wheels: %v\n%s", err, out)
	}
	wheels, _ := filepath.Glob(filepath.Join(dist, "*.whl"))
	if len(wheels) != 1 || !strings.HasPrefix(filepath.Base(wheels[0]), "torchmem-"+pyVersion+"-py3-none-") {
		t.Fatalf("make wheels wrote %q, want one wheel of version %s", wheels, pyVersion)
	}
	readWheel(t, wheels[0])

	v := newVenv(t, py)
	work := t.TempDir()
	before := tree(t, v.dir)
	if code, out, errs := v.run(t, work, nil, "pip", "install", "--no-index", wheels[0]); code != 0 {
		t.Fatalf("pip install: exit %d\n%s%s", code, out, errs)
	}

	// torchmem --version, from the PATH, names the version of the wheel.
	code, versionLine, errs := v.run(t, work, nil, "sh", "-c", "command -v torchmem && torchmem --version")
	wantPath := filepath.Join(v.dir, "bin", "torchmem") + "\n"
	line := regexp.MustCompile(`^torchmem ` + regexp.QuoteMeta(version) + ` \(commit [0-9a-f]{7,12}(-dirty)?, go[^,]+, ` + runtime.GOOS + "/" + runtime.GOARCH + `\)\n$`)
	if code != 0 || !strings.HasPrefix(versionLine, wantPath) || !line.MatchString(strings.TrimPrefix(versionLine, wantPath)) {
		t.Fatalf("torchmem --version: exit %d, %q %s; want %s then a line matching %v", code, versionLine, errs, wantPath, line)
	}
	versionLine = strings.TrimPrefix(versionLine, wantPath)
	printed := strings.Fields(versionLine)[1]
	if got, err := pep440(printed); err != nil || got != pyVersion {
		t.Errorf("torchmem --version prints %s, which is %s in PEP 440, but the wheel is %s", printed, got, pyVersion)
	}
	if code, out, _ := v.run(t, work, nil, "python", "-c", "import importlib.metadata as m; print(m.version('torchmem'))"); code != 0 || out != pyVersion+"\n" {
		t.Errorf("installed version: exit %d %q, want %s", code, out, pyVersion)
	}
	// python -m torchmem is the same binary: the same line, and an unknown
	// command's exit status (2) and message.
	if code, out, errs := v.run(t, work, nil, "python", "-m", "torchmem", "--version"); code != 0 || out != versionLine {
		t.Errorf("python -m torchmem --version: exit %d %q %s, want %q", code, out, errs, versionLine)
	}
	if code, _, errs := v.run(t, work, nil, "python", "-m", "torchmem", "no-such-command"); code != 2 || !strings.HasPrefix(errs, `torchmem: unknown command "no-such-command"`) {
		t.Errorf("python -m torchmem no-such-command: exit %d, stderr %q", code, errs)
	}

	// torchmem analyze of a real OOM snapshot: the request and the free
	// memory its pickle holds (402653184 and 264634368 bytes, read with
	// Python's pickle for snapshot's real-file tests).
	code, out, errs := v.run(t, work, nil, "torchmem", "analyze", nesta)
	if code != 0 || !strings.Contains(strings.Join(strings.Fields(out), " "), "384 MiB requested with 252 MiB free on the device") {
		t.Errorf("torchmem analyze: exit %d %s\n%s", code, errs, out)
	}
	code, out, _ = v.run(t, work, nil, "python", "-m", "torchmem", "analyze", "--format", "json", nesta)
	var a struct {
		Devices []struct {
			OOM *struct {
				Requested  int64 `json:"requested_bytes"`
				DeviceFree int64 `json:"device_free_bytes"`
			} `json:"oom"`
		} `json:"devices"`
	}
	if err := json.Unmarshal([]byte(out), &a); code != 0 || err != nil || len(a.Devices) != 1 || a.Devices[0].OOM == nil ||
		a.Devices[0].OOM.Requested != 402653184 || a.Devices[0].OOM.DeviceFree != 264634368 {
		t.Errorf("python -m torchmem analyze --format json: exit %d, %v: %+v", code, err, a)
	}

	t.Run("record", func(t *testing.T) { recordFromWheel(t, v, work) })
	t.Run("pip install --target", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "target")
		if code, out, errs := v.run(t, work, nil, "pip", "install", "--no-index", "--target", target, wheels[0]); code != 0 {
			t.Fatalf("pip install --target: exit %d\n%s%s", code, out, errs)
		}
		// Another interpreter, with the folder on PYTHONPATH only.
		code, out, errs := v.run(t, work, []string{"PYTHONPATH=" + target}, py, "-c", "import torchmem; print(torchmem.find_torchmem_bin())")
		if want := filepath.Join(target, "bin", "torchmem") + "\n"; code != 0 || out != want {
			t.Errorf("find_torchmem_bin: exit %d %q %s, want %q", code, out, errs, want)
		}
		if code, out, _ := v.run(t, work, []string{"PYTHONPATH=" + target}, py, "-m", "torchmem", "--version"); code != 0 || out != versionLine {
			t.Errorf("python -m torchmem --version: exit %d %q", code, out)
		}
	})
	t.Run("versions parse as pip parses them", func(t *testing.T) {
		var src strings.Builder
		src.WriteString("from pip._vendor.packaging.version import Version\nfor v in [\n")
		var want []string
		for _, c := range versionCases {
			fmt.Fprintf(&src, "    %q,\n", c.want)
			want = append(want, c.want)
		}
		// Later builds sort later, as PEP 440 orders them.
		src.WriteString("]:\n    print(str(Version(v)))\n" +
			"order = ['1.2.3rc1', '1.2.3rc1.post12+gabcdef0', '1.2.3', '1.2.3+dirty', '1.2.3.post4+g9f44c7a', '1.2.3.post4+g9f44c7a.dirty', '1.2.4a0']\n" +
			"print(sorted(order, key=Version) == order)\n")
		code, out, errs := v.run(t, work, nil, "python", "-c", src.String())
		if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); code != 0 || !slices.Equal(got, append(want, "True")) {
			t.Errorf("pip's packaging: exit %d %s\n%q\nwant %q", code, errs, got, append(want, "True"))
		}
	})

	// pip uninstall leaves the environment as it was before the install.
	if code, out, errs := v.run(t, work, nil, "pip", "uninstall", "-y", "torchmem"); code != 0 {
		t.Fatalf("pip uninstall: exit %d\n%s%s", code, out, errs)
	}
	if after := tree(t, v.dir); !slices.Equal(after, before) {
		var added, removed []string
		for _, f := range after {
			if !slices.Contains(before, f) {
				added = append(added, f)
			}
		}
		for _, f := range before {
			if !slices.Contains(after, f) {
				removed = append(removed, f)
			}
		}
		t.Errorf("after pip uninstall the environment has %q more and %q fewer files than before the install", added, removed)
	}
	if code, _, errs := v.run(t, work, nil, "python", "-m", "torchmem", "--version"); code == 0 || !strings.Contains(errs, "No module named torchmem") {
		t.Errorf("python -m torchmem after uninstall: exit %d %q", code, errs)
	}
}
