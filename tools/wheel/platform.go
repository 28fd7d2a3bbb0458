package main

import (
	"debug/buildinfo"
	"debug/macho"
	"fmt"
	"strings"
)

// platform is what a wheel says about the binary it carries: where it runs.
type platform struct {
	goos, goarch string
	// tags are the wheel's platform tags, most specific first.
	tags []string
}

// Mach-O load commands that state the oldest macOS a binary runs on.
const (
	lcVersionMinMacOSX = 0x24
	lcBuildVersion     = 0x32
	platformMacOS      = 1
)

// binaryPlatform reads the platform of a Go binary from the binary itself
// (its build settings and, on macOS, its load commands) rather than from
// its name, and the wheel tags that let pip install it exactly there:
//
//   - Linux: the binary must be static (built with CGO_ENABLED=0): it then
//     needs no libc at all, so it is tagged both manylinux_2_17 (glibc)
//     and musllinux_1_1 (Alpine). manylinux_2_17 (manylinux2014, CentOS 7,
//     Linux 3.10) is the oldest tag for aarch64 and the oldest whose
//     reference system has a kernel as new as Go's minimum (Linux 3.2).
//   - macOS: the oldest version the Go linker wrote into the binary
//     (LC_BUILD_VERSION's minos), as macosx_MAJOR_MINOR.
func binaryPlatform(path string) (platform, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return platform{}, fmt.Errorf("%s: not a Go binary: %v", path, err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	p := platform{goos: settings["GOOS"], goarch: settings["GOARCH"]}
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[p.goarch]
	switch {
	case arch == "" || (p.goos != "linux" && p.goos != "darwin"):
		return p, fmt.Errorf("%s: built for %s/%s, which has no wheel here (linux or darwin, amd64 or arm64)", path, p.goos, p.goarch)
	case settings["CGO_ENABLED"] != "0":
		return p, fmt.Errorf("%s: built with CGO_ENABLED=%q: a wheel carries the static binary (CGO_ENABLED=0, make release)", path, settings["CGO_ENABLED"])
	case p.goos == "linux":
		p.tags = []string{"manylinux_2_17_" + arch, "manylinux2014_" + arch, "musllinux_1_1_" + arch}
		return p, nil
	}
	major, minor, err := macosMinimum(path)
	if err != nil {
		return p, err
	}
	if arch == "aarch64" {
		arch = "arm64" // macOS's name
	}
	p.tags = []string{fmt.Sprintf("macosx_%d_%d_%s", major, minor, arch)}
	return p, nil
}

// macosMinimum returns the oldest macOS a Mach-O binary runs on, from its
// LC_BUILD_VERSION (or older LC_VERSION_MIN_MACOSX) load command, whose
// version is packed as xxxx.yy.zz in nibbles.
func macosMinimum(path string) (major, minor int, err error) {
	f, err := macho.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %v", path, err)
	}
	defer f.Close()
	for _, l := range f.Loads {
		raw := l.Raw()
		if len(raw) < 16 {
			continue
		}
		var v uint32
		switch f.ByteOrder.Uint32(raw) {
		case lcBuildVersion:
			if f.ByteOrder.Uint32(raw[8:]) != platformMacOS {
				continue
			}
			v = f.ByteOrder.Uint32(raw[12:])
		case lcVersionMinMacOSX:
			v = f.ByteOrder.Uint32(raw[8:])
		default:
			continue
		}
		return int(v >> 16), int(v >> 8 & 0xff), nil
	}
	return 0, 0, fmt.Errorf("%s: no LC_BUILD_VERSION: the oldest macOS it runs on is unknown", path)
}

// tagSuffix is the platform part of a wheel's file name: its tags joined
// with dots (a compressed tag set).
func (p platform) tagSuffix() string { return strings.Join(p.tags, ".") }
