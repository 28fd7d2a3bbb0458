package main

import (
	"os"
	"testing"
)

// TestMain lets tests run torchmem as a process of its own (the test binary
// started again with TORCHMEM_TEST_CLI=1 is torchmem): what torchmem record
// does with signals, process groups and inherited files can only be seen
// from outside.
func TestMain(m *testing.M) {
	if os.Getenv("TORCHMEM_TEST_CLI") == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	// The tests run the same wherever CI runs them: a GitHub Actions job's
	// workspace and step summary are the tests' to set, never inherited (a
	// test would write into the job's summary, or name files from its
	// workspace in annotations that goldens fix).
	for _, v := range []string{"GITHUB_WORKSPACE", "GITHUB_STEP_SUMMARY", "GITHUB_ACTIONS"} {
		os.Unsetenv(v)
	}
	os.Exit(m.Run())
}
