package main

import (
	"bufio"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"debug/gosym"
	"debug/macho"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// checkStaticELF fails unless the file is an ELF executable for the
// machine that links nothing at run time: no interpreter (ld.so), no
// dynamic section, no shared libraries.
func checkStaticELF(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	if f.Machine != machine || f.Type != elf.ET_EXEC {
		t.Errorf("%s: %v %v, want an executable for %v", path, f.Type, f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: has a %v program header: it is linked dynamically", path, p.Type)
		}
	}
	if s := f.Section(".dynamic"); s != nil {
		t.Errorf("%s: has a .dynamic section", path)
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s: needs %q", path, libs)
	}
}

// checkVersion runs the binary's --version and checks the line.
func checkVersion(t *testing.T, bin, version string) {
	t.Helper()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v: %s", bin, err, out)
	}
	commit := `[0-9a-f]{7,12}`
	if head, err := exec.Command("git", "-C", repoRoot(), "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(head))
	}
	want := regexp.MustCompile(fmt.Sprintf(`^torchmem %s \(commit %s, %s, %s/%s\)\n$`,
		regexp.QuoteMeta(version), commit, regexp.QuoteMeta(runtime.Version()), runtime.GOOS, runtime.GOARCH))
	if !want.Match(out) {
		t.Errorf("%s --version printed %q, want %v", bin, out, want)
	}
}

// TestMakeBuildIsStatic: make build gives the static binary the README
// promises (CGO_ENABLED=0), and its --version names the version and commit.
func TestMakeBuildIsStatic(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the ELF check is for Linux")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	bin := filepath.Join(t.TempDir(), "torchmem")
	cmd := exec.Command("make", "-s", "build", "BIN="+bin, "VERSION=v9.8.7-test")
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	checkStaticELF(t, bin, machine)
	checkVersion(t, bin, "v9.8.7-test")
	checkNoTestCode(t, bin)
}

// testOnly are import paths (and their sub-packages) that only tests and
// developer tools may link: Go's testing package, the reference pickle
// decoder, the comparison, browser and terminal libraries of the tests,
// and the repository's test scaffolding and tools.
var testOnly = []string{"testing", "github.com/nlpodyssey/gopickle", "github.com/google/go-cmp",
	"github.com/chromedp", "github.com/creack/pty", "github.com/stretchr/testify",
	"github.com/torchmem/torchmem/internal/snapshottest", "github.com/torchmem/torchmem/tools",
	"github.com/torchmem/torchmem/internal/resulttest", "github.com/torchmem/torchmem/internal/analysistest",
	"github.com/torchmem/torchmem/internal/load/loadtest"}

// isTestOnly reports whether an import path is one of testOnly or below one.
func isTestOnly(path string) bool {
	for _, p := range testOnly {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// TestBinaryLinksNoTestCode: the torchmem command imports no test code,
// directly or through another package (go list -deps).
func TestBinaryLinksNoTestCode(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/torchmem/torchmem/snapshot") {
		t.Fatalf("go list -deps lists %d packages without torchmem's own snapshot: not the command's list", len(deps))
	}
	for _, d := range deps {
		if isTestOnly(d) {
			t.Errorf("the torchmem command links %s", d)
		}
	}
}

// checkNoTestCode reads a built binary: its build information names no
// test-only module and its function table (which -s leaves, the runtime
// needs it) holds no function of a test-only package.
func checkNoTestCode(t *testing.T, bin string) {
	t.Helper()
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	for _, d := range info.Deps {
		if isTestOnly(d.Path) {
			t.Errorf("%s links the module %s", bin, d.Path)
		}
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		t.Fatalf("%s has no .gopclntab or .text section", bin)
	}
	data, err := pcln.Data()
	if err != nil {
		t.Fatal(err)
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		t.Fatalf("%s: the function table: %v", bin, err)
	}
	seen := map[string]bool{}
	for _, fn := range tab.Funcs {
		if p := fn.PackageName(); isTestOnly(p) && !seen[p] {
			seen[p] = true
			t.Errorf("%s holds functions of %s (%s)", bin, p, fn.Name)
		}
	}
	if len(tab.Funcs) < 1000 || !seen["testing"] && !slices.ContainsFunc(tab.Funcs, func(fn gosym.Func) bool {
		return fn.PackageName() == "github.com/torchmem/torchmem/snapshot"
	}) {
		t.Errorf("%s: %d functions and none of torchmem's snapshot package: the table was not read", bin, len(tab.Funcs))
	}
}

// TestReleaseFiles checks what make release wrote into
// $TORCHMEM_RELEASE_DIR for version $TORCHMEM_RELEASE_VERSION (.ci/run
// runs make wheels, which is make release and the wheels, then this test):
// one static binary per platform, named with the version; SHA256SUMS with
// each binary's checksum, and each wheel's (tools/wheel's
// TestReleaseWheels checks what the wheels hold); and the linux/amd64
// binary's --version.
func TestReleaseFiles(t *testing.T) {
	dir, version := os.Getenv("TORCHMEM_RELEASE_DIR"), os.Getenv("TORCHMEM_RELEASE_VERSION")
	if (dir == "") != (version == "") {
		t.Fatal("set both TORCHMEM_RELEASE_DIR and TORCHMEM_RELEASE_VERSION")
	}
	if dir == "" {
		t.Skip("TORCHMEM_RELEASE_DIR and TORCHMEM_RELEASE_VERSION are not set (.ci/run sets them after make release)")
	}
	platforms := []struct {
		os, arch string
		elf      elf.Machine
		macho    macho.Cpu
	}{
		{"linux", "amd64", elf.EM_X86_64, 0},
		{"linux", "arm64", elf.EM_AARCH64, 0},
		{"darwin", "amd64", 0, macho.CpuAmd64},
		{"darwin", "arm64", 0, macho.CpuArm64},
	}
	want := []string{"SHA256SUMS"}
	for _, p := range platforms {
		want = append(want, fmt.Sprintf("torchmem-%s-%s-%s", version, p.os, p.arch))
	}
	slices.Sort(want)
	var got, wheels []string
	for _, name := range dirFiles(t, dir) {
		if strings.HasSuffix(name, ".whl") {
			wheels = append(wheels, name)
		} else {
			got = append(got, name)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s holds %q (and wheels), want %q", dir, got, want)
	}

	sums := readSums(t, filepath.Join(dir, "SHA256SUMS"))
	for _, name := range wheels {
		if sum, ok := sums[name]; !ok || sum != sha256File(t, filepath.Join(dir, name)) {
			t.Errorf("SHA256SUMS: %s %q, the file's is %s", name, sum, sha256File(t, filepath.Join(dir, name)))
		}
		delete(sums, name)
	}
	for _, p := range platforms {
		name := fmt.Sprintf("torchmem-%s-%s-%s", version, p.os, p.arch)
		path := filepath.Join(dir, name)
		if got, ok := sums[name]; !ok || got != sha256File(t, path) {
			t.Errorf("SHA256SUMS: %s %q, the file's is %s", name, got, sha256File(t, path))
		}
		delete(sums, name)
		if p.os == "linux" {
			checkStaticELF(t, path, p.elf)
			continue
		}
		// macOS has no static linking: a Go binary without cgo links only
		// the system's own libraries, present on every Mac.
		f, err := macho.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		libs, _ := f.ImportedLibraries()
		f.Close()
		if f.Cpu != p.macho || f.Type != macho.TypeExec {
			t.Errorf("%s: %v %v, want an executable for %v", name, f.Type, f.Cpu, p.macho)
		}
		for _, lib := range libs {
			if !strings.HasPrefix(lib, "/usr/lib/") && !strings.HasPrefix(lib, "/System/Library/") {
				t.Errorf("%s needs %s, which is not part of macOS", name, lib)
			}
		}
	}
	if len(sums) > 0 {
		t.Errorf("SHA256SUMS lists files that are not there: %v", sums)
	}
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		checkVersion(t, filepath.Join(dir, fmt.Sprintf("torchmem-%s-linux-amd64", version)), version)
	}
}

// readSums reads a sha256sum file: "HEX  NAME" lines.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	line := regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("%s: line %q is not HEX  NAME", path, sc.Text())
		}
		sums[m[2]] = m[1]
	}
	return sums
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// dirFiles lists a folder's file names, sorted (none if it does not exist).
func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}
