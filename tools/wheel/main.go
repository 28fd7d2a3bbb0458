// Command wheel packs torchmem release binaries into Python wheels, so that
// `pip install torchmem` puts the same static binary as `make release` on
// the PATH of a Python environment, and `python -m torchmem` runs it. It is
// run by `make wheels`, never linked into torchmem:
//
//	go run ./tools/wheel -version VERSION -o DIR [-readme F] [-license F]... [-url URL] BINARY...
//
// Each binary's platform (and so the wheel's tags) is read from the binary
// itself; VERSION is what `torchmem --version` prints (git describe), made
// a PEP 440 version. Only Go's standard library writes the wheel: a wheel is
// a zip file with a RECORD of every file's SHA-256.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// summary is the one line pip and PyPI show under the name.
const summary = "Post-mortem of PyTorch GPU memory: what filled the GPU, in which phase, what leaked, what to change"

// classifiers are PyPI's trove classifiers of every wheel (the licence is
// the License-Expression, which PEP 639 keeps apart from them).
var classifiers = []string{
	"Environment :: Console",
	"Environment :: GPU :: NVIDIA CUDA",
	"Intended Audience :: Developers",
	"Intended Audience :: Science/Research",
	"Operating System :: MacOS",
	"Operating System :: POSIX :: Linux",
	"Programming Language :: Go",
	"Topic :: Scientific/Engineering :: Artificial Intelligence",
	"Topic :: Software Development :: Debuggers",
}

// multiFlag is a flag that may be given several times.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "wheel:", err)
		os.Exit(2)
	}
}

func run(args []string, stdout io.Writer) error {
	fl := flag.NewFlagSet("wheel", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	version := fl.String("version", "", "the version torchmem --version prints (Makefile's VERSION)")
	out := fl.String("o", ".", "folder to write the wheels into")
	readme := fl.String("readme", "", "Markdown file that is the wheels' description (the README)")
	url := fl.String("url", "", "the project's repository, for Project-URL")
	license := fl.String("license-expression", "Apache-2.0", "SPDX licence expression of what the wheel carries")
	var licenses multiFlag
	fl.Var(&licenses, "license", "licence or notice file to ship in the wheels (repeatable)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *version == "" || fl.NArg() == 0 {
		return fmt.Errorf("usage: wheel -version VERSION [-o DIR] [-readme F] [-license F] [-license-expression E] [-url URL] BINARY [BINARY]")
	}
	pyVersion, err := pep440(*version)
	if err != nil {
		return err
	}
	proj := project{
		summary: summary, url: strings.TrimSuffix(*url, "/"), licenses: licenses, license: *license,
		requiresPy: ">=3.8", classifiers: classifiers, modified: buildTime(),
	}
	if *readme != "" {
		data, err := os.ReadFile(*readme)
		if err != nil {
			return err
		}
		proj.readme = string(data)
	}
	seen := map[string]string{}
	for _, bin := range fl.Args() {
		p, err := binaryPlatform(bin)
		if err != nil {
			return err
		}
		key := p.goos + "-" + p.goarch
		if prev, dup := seen[key]; dup {
			return fmt.Errorf("%s and %s are both for %s/%s", prev, bin, p.goos, p.goarch)
		}
		seen[key] = bin
		// A release binary is named torchmem-VERSION-OS-ARCH: a name that
		// says another version or platform is a mix-up of folders.
		if name := filepath.Base(bin); strings.HasPrefix(name, "torchmem-") && name != "torchmem-"+*version+"-"+key {
			return fmt.Errorf("%s: built for %s/%s, but named for another version or platform than torchmem-%s-%s", bin, p.goos, p.goarch, *version, key)
		}
		path, err := buildWheel(*out, bin, pyVersion, p, proj)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, path)
	}
	return nil
}

// buildTime is the time stamped on every file of a wheel: SOURCE_DATE_EPOCH
// when set (reproducible builds), else the zip format's first day, so that
// the same binaries always give the same wheels.
func buildTime() time.Time {
	if s, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil && s >= 315532800 {
		return time.Unix(s, 0).UTC()
	}
	return time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
}
