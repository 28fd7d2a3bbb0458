package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// commit is set at build time with -ldflags "-X main.commit=…" (make build,
// make release); otherwise the Go toolchain's VCS stamp gives it when the
// binary was built in a git checkout (go install ./cmd/torchmem).
var commit = ""

// versionLine is what torchmem --version prints after the name: the
// version, the commit it was built from, the Go version and the platform.
func versionLine() string {
	v, c, dirty := version, commit, false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version // go install module@version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if c == "" {
					c = s.Value
				}
			case "vcs.modified":
				dirty = s.Value == "true" && commit == ""
			}
		}
	}
	if len(c) > 12 {
		c = c[:12]
	}
	switch {
	case c == "":
		c = "unknown"
	case dirty:
		c += "-dirty"
	}
	return fmt.Sprintf("%s (commit %s, %s, %s/%s)", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
