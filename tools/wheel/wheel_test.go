package main

import (
	"bytes"
	"debug/macho"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const tinyProgram = "package main\n\nfunc main() {}\n"

// buildArgs are the flags make wheels passes, less the version and output.
func buildArgs() []string {
	root := repoRoot()
	return []string{
		"-readme", filepath.Join(root, "README.md"), "-url", "https://example.com/torchmem/",
		"-license", filepath.Join(root, "LICENSE"),
		"-license", filepath.Join(root, "report", "assets", "NOTICE-echarts"),
		"-license-expression", "Apache-2.0 AND BSD-3-Clause",
	}
}

// TestWheels builds the wheels of four static binaries (one per release
// platform) and reads them back: the names and tags pip matches, the binary
// byte for byte as an executable script, the Python package, METADATA
// complete, RECORD right for every file.
func TestWheels(t *testing.T) {
	bins, out := t.TempDir(), t.TempDir()
	cases := []struct {
		goos, goarch string
		tags         []string
	}{
		{"linux", "amd64", []string{"manylinux_2_17_x86_64", "manylinux2014_x86_64", "musllinux_1_1_x86_64"}},
		{"linux", "arm64", []string{"manylinux_2_17_aarch64", "manylinux2014_aarch64", "musllinux_1_1_aarch64"}},
		{"darwin", "amd64", nil}, // macosx_MAJOR_MINOR_x86_64, MAJOR.MINOR read below
		{"darwin", "arm64", nil},
	}
	args := append([]string{"-version", "v1.2.3-4-g9f44c7a", "-o", out}, buildArgs()...)
	for _, c := range cases {
		args = append(args, goBuild(t, bins, "torchmem-v1.2.3-4-g9f44c7a-"+c.goos+"-"+c.goarch, c.goos, c.goarch, "0", tinyProgram))
	}
	var stdout bytes.Buffer
	if err := run(args, &stdout); err != nil {
		t.Fatal(err)
	}
	readme, _ := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
	var written []string
	for _, c := range cases {
		bin := filepath.Join(bins, "torchmem-v1.2.3-4-g9f44c7a-"+c.goos+"-"+c.goarch)
		tags := c.tags
		if c.goos == "darwin" {
			f, err := macho.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			major, minor := buildVersionMinOS(t, f)
			f.Close()
			arch := map[string]string{"amd64": "x86_64", "arm64": "arm64"}[c.goarch]
			tags = []string{"macosx_" + major + "_" + minor + "_" + arch}
		}
		name := "torchmem-1.2.3.post4+g9f44c7a-py3-none-" + strings.Join(tags, ".") + ".whl"
		written = append(written, filepath.Join(out, name))
		w := readWheel(t, filepath.Join(out, name))
		di := "torchmem-1.2.3.post4+g9f44c7a.dist-info/"
		script := "torchmem-1.2.3.post4+g9f44c7a.data/scripts/torchmem"
		wantNames := []string{"torchmem/__init__.py", "torchmem/__main__.py", script,
			di + "licenses/LICENSE", di + "licenses/NOTICE-echarts", di + "METADATA", di + "WHEEL", di + "RECORD"}
		if !slices.Equal(w.names, wantNames) {
			t.Errorf("%s holds %q, want %q", name, w.names, wantNames)
		}
		binData, _ := os.ReadFile(bin)
		if !bytes.Equal(w.data[script], binData) || w.mode[script] != 0o755 {
			t.Errorf("%s: %s is not the binary as an executable (mode %v)", name, script, w.mode[script])
		}
		if w.mode["torchmem/__init__.py"] != 0o644 {
			t.Errorf("%s: the package's mode is %v", name, w.mode["torchmem/__init__.py"])
		}
		wheel := string(w.data[di+"WHEEL"])
		var wantTags []string
		for _, tag := range tags {
			wantTags = append(wantTags, "py3-none-"+tag)
		}
		if got := header(wheel, "Tag"); !slices.Equal(got, wantTags) || header(wheel, "Root-Is-Purelib")[0] != "false" || header(wheel, "Wheel-Version")[0] != "1.0" {
			t.Errorf("%s: WHEEL\n%s\nwant tags %q, not purelib", name, wheel, wantTags)
		}
		meta := string(w.data[di+"METADATA"])
		for key, want := range map[string][]string{
			"Metadata-Version":   {"2.4"},
			"Name":               {"torchmem"},
			"Version":            {"1.2.3.post4+g9f44c7a"},
			"Summary":            {summary},
			"License-Expression": {"Apache-2.0 AND BSD-3-Clause"},
			"License-File":       {"LICENSE", "NOTICE-echarts"},
			"Requires-Python":    {">=3.8"},
			"Project-URL": {"Homepage, https://example.com/torchmem", "Source, https://example.com/torchmem",
				"Issues, https://example.com/torchmem/issues"},
			"Description-Content-Type": {"text/markdown; charset=UTF-8"},
			"Classifier":               classifiers,
		} {
			if got := header(meta, key); !slices.Equal(got, want) {
				t.Errorf("%s: METADATA %s: %q, want %q", name, key, got, want)
			}
		}
		if _, body, _ := strings.Cut(meta, "\n\n"); body != string(readme) {
			t.Errorf("%s: METADATA's description is not the README (%d bytes, want %d)", name, len(body), len(readme))
		}
	}
	if got := strings.Fields(stdout.String()); !slices.Equal(got, written) {
		t.Errorf("printed %q, want %q", got, written)
	}

	// The same binaries give the same wheels, byte for byte.
	again := t.TempDir()
	args[slices.Index(args, out)] = again
	if err := run(args, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range written {
		a, _ := os.ReadFile(w)
		b, _ := os.ReadFile(filepath.Join(again, filepath.Base(w)))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs when built again", filepath.Base(w))
		}
	}
}

// buildVersionMinOS reads LC_BUILD_VERSION's minos as decimal strings,
// independently of the code under test.
func buildVersionMinOS(t *testing.T, f *macho.File) (string, string) {
	t.Helper()
	for _, l := range f.Loads {
		raw := l.Raw()
		if len(raw) >= 16 && f.ByteOrder.Uint32(raw) == 0x32 {
			v := f.ByteOrder.Uint32(raw[12:])
			return strconv.Itoa(int(v >> 16)), strconv.Itoa(int(v >> 8 & 0xff))
		}
	}
	t.Fatal("no LC_BUILD_VERSION")
	return "", ""
}

// TestMacOSTagFromBinary: the macOS tag is the oldest version written in
// the binary, whatever it is: a binary patched to say 13.4 is tagged so.
func TestMacOSTagFromBinary(t *testing.T) {
	bin := goBuild(t, t.TempDir(), "torchmem", "darwin", "arm64", "0", tinyProgram)
	f, err := macho.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	var offset int64 = -1
	pos := int64(32) // after the 64-bit Mach-O header
	for _, l := range f.Loads {
		raw := l.Raw()
		if f.ByteOrder.Uint32(raw) == lcBuildVersion {
			offset = pos + 12
		}
		pos += int64(len(raw))
	}
	f.Close()
	if offset < 0 {
		t.Fatal("no LC_BUILD_VERSION")
	}
	data, _ := os.ReadFile(bin)
	copy(data[offset:], []byte{0, 4, 13, 0}) // 13.4.0, little-endian xxxx.yy.zz
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := binaryPlatform(bin)
	if err != nil || !slices.Equal(p.tags, []string{"macosx_13_4_arm64"}) {
		t.Errorf("tags %q, %v; want macosx_13_4_arm64", p.tags, err)
	}
}

// TestWheelRefusals: what cannot make a right wheel is refused with one
// line naming the file.
func TestWheelRefusals(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "torchmem-v1-linux-amd64.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho torchmem\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	amd64 := goBuild(t, dir, "amd64", "linux", "amd64", "0", tinyProgram)
	cases := []struct {
		name string
		bins []string
		want string
	}{
		{"not a Go binary", []string{script}, script + ": not a Go binary: "},
		{"Windows", []string{goBuild(t, dir, "torchmem.exe", "windows", "amd64", "0", tinyProgram)},
			"torchmem.exe: built for windows/amd64, which has no wheel here (linux or darwin, amd64 or arm64)"},
		{"not static", []string{goBuild(t, dir, "cgo", "linux", "amd64", "1", tinyProgram)},
			`cgo: built with CGO_ENABLED="1": a wheel carries the static binary (CGO_ENABLED=0, make release)`},
		{"named for another platform", []string{goBuild(t, dir, "torchmem-v1-linux-arm64", "linux", "amd64", "0", tinyProgram)},
			"torchmem-v1-linux-arm64: built for linux/amd64, but named for another version or platform than torchmem-v1-linux-amd64"},
		{"named for another version", []string{goBuild(t, dir, "torchmem-v0.9-linux-amd64", "linux", "amd64", "0", tinyProgram)},
			"torchmem-v0.9-linux-amd64: built for linux/amd64, but named for another version or platform than torchmem-v1-linux-amd64"},
		{"two for one platform", []string{amd64, amd64}, amd64 + " and " + amd64 + " are both for linux/amd64"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			err := run(append([]string{"-version", "v1", "-o", out}, c.bins...), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want one line with %q", err, c.want)
			}
		})
	}
	if err := run([]string{"-version", "-", "-o", dir, amd64}, &bytes.Buffer{}); err == nil || err.Error() != `version "-": no release, commit or name in it` {
		t.Errorf("version -: %v", err)
	}
}
