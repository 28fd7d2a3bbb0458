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
	os.Exit(m.Run())
}
