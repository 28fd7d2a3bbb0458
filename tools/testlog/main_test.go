package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestSummarize: the log has each package's result and the output of the
// failed tests only, ends with the skipped tests and their reasons, and
// the verdict is a failure exactly when a test, a package or the build
// failed (or nothing ran).
func TestSummarize(t *testing.T) {
	const (
		pass = `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: a log line\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
`
		skip = `{"Action":"run","Package":"p","Test":"TestB/sub"}
{"Action":"output","Package":"p","Test":"TestB/sub","Output":"=== RUN   TestB/sub\n"}
{"Action":"output","Package":"p","Test":"TestB/sub","Output":"    b_test.go:20: no terminal to test with\n"}
{"Action":"output","Package":"p","Test":"TestB/sub","Output":"--- SKIP: TestB/sub (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestB/sub"}
`
		fail = `{"Action":"output","Package":"q","Test":"TestC","Output":"=== RUN   TestC\n"}
{"Action":"output","Package":"q","Test":"TestC","Output":"    c_test.go:5: got 3, want 4\n"}
{"Action":"output","Package":"q","Test":"TestC","Output":"--- FAIL: TestC (0.00s)\n"}
{"Action":"fail","Package":"q","Test":"TestC"}
{"Action":"output","Package":"q","Output":"FAIL\tq\t0.01s\n"}
{"Action":"fail","Package":"q"}
`
		pkgOK = `{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.01s\n"}
{"Action":"pass","Package":"p"}
`
		build = `{"ImportPath":"r [r.test]","Action":"build-output","Output":"r/x.go:3:1: syntax error\n"}
{"ImportPath":"r [r.test]","Action":"build-fail"}
{"Action":"output","Package":"r","Output":"FAIL\tr [build failed]\n"}
{"Action":"fail","Package":"r"}
`
	)
	cases := []struct {
		name, in string
		ok       bool
		want     string
	}{
		{"all pass", pass + pkgOK, true, "ok  \tp\t0.01s\nskipped tests: none\n"},
		{"a skip", pass + skip + pkgOK, true, "ok  \tp\t0.01s\nskipped tests: 1\n  p.TestB/sub: b_test.go:20: no terminal to test with\n"},
		{"a failure", pass + pkgOK + fail, false,
			"ok  \tp\t0.01s\n=== RUN   TestC\n    c_test.go:5: got 3, want 4\n--- FAIL: TestC (0.00s)\nFAIL\tq\t0.01s\nskipped tests: none\n"},
		{"a build failure", build, false, "r/x.go:3:1: syntax error\nFAIL\tr [build failed]\nskipped tests: none\n"},
		{"nothing ran", "", false, "testlog: no package result in the input\nskipped tests: none\n"},
		{"go's own message", "go: cannot find main module\n", false,
			"go: cannot find main module\ntestlog: no package result in the input\nskipped tests: none\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			ok := summarize(strings.NewReader(c.in), &b)
			if ok != c.ok || b.String() != c.want {
				t.Errorf("ok %v, log:\n%s\nwant ok %v, log:\n%s", ok, b.String(), c.ok, c.want)
			}
		})
	}
}
