package snapshottest

import (
	"flag"
	"testing"
)

// The -update flag (`go test ./... -update` rewrites golden files and other
// generated expectations) is registered here, in every test binary that uses
// these helpers, so that the flag is known to all of them; only in test
// binaries, so tools/gen (which uses this package to write its files) gains
// no flag. The golden subpackage compares and rewrites golden files.
func init() {
	if testing.Testing() && flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

// Updating reports whether the test run was asked to rewrite golden files.
func Updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}
