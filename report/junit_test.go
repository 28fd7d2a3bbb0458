package report

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/check"
	"github.com/torchmem/torchmem/result"
)

// gateResults is a check of two inputs with every outcome and hostile
// strings (XML, Markdown, workflow-command and terminal metacharacters).
func gateResults() []*check.Result {
	a := &check.Result{Schema: check.CheckSchemaID, Input: result.Input{Path: "run <a>&\"b\".pickle"},
		Checks: []check.Item{
			{Name: "device 0: peak budget", Kind: "budget", Key: "peak", Status: check.CheckPass, Actual: 10, Limit: 20, Message: "peak fine"},
			{Name: "device 0: leaks budget", Kind: "budget", Key: "leaks", Status: check.CheckFail, Actual: 2, Limit: 0,
				Message: "2 leaks at evil.py:1 </failure>]]> %0A\n::error::x \x1b[31m"},
			{Name: "device 0: phase:optimizer budget", Kind: "budget", Key: "phase:optimizer", Status: check.CheckSkip, Message: "no optimizer phase"},
		}, Passed: 1, Failed: 1, Skipped: 1}
	b := &check.Result{Schema: check.CheckSchemaID, Input: result.Input{Path: "other.json"},
		Checks: []check.Item{{Name: "device 1: peak vs baseline", Kind: "regression", Key: "peak", Status: check.CheckPass, Message: "ok"}},
		Passed: 1}
	return []*check.Result{a, b}
}

func TestJUnitIsValidXML(t *testing.T) {
	var buf bytes.Buffer
	if err := JUnit(&buf, gateResults()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), xml.Header) {
		t.Errorf("no XML header: %q", buf.String()[:40])
	}
	var got junitSuites
	if err := xml.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("not valid XML: %v\n%s", err, buf.String())
	}
	type tc struct {
		Suite, Name, Class, Failure, Skipped string
	}
	var cases []tc
	for _, s := range got.Suites {
		for _, c := range s.Cases {
			x := tc{Suite: s.Name, Name: c.Name, Class: c.Classname}
			if c.Failure != nil {
				x.Failure = c.Failure.Message
			}
			if c.Skipped != nil {
				x.Skipped = c.Skipped.Message
			}
			cases = append(cases, x)
		}
	}
	want := []tc{
		{Suite: "torchmem check run <a>&\"b\".pickle", Name: "device 0: peak budget", Class: "torchmem.budget"},
		// \x1b is not allowed in XML: the encoder writes U+FFFD.
		{Suite: "torchmem check run <a>&\"b\".pickle", Name: "device 0: leaks budget", Class: "torchmem.budget",
			Failure: "2 leaks at evil.py:1 </failure>]]> %0A\n::error::x \uFFFD[31m"},
		{Suite: "torchmem check run <a>&\"b\".pickle", Name: "device 0: phase:optimizer budget", Class: "torchmem.budget", Skipped: "no optimizer phase"},
		{Suite: "torchmem check other.json", Name: "device 1: peak vs baseline", Class: "torchmem.regression"},
	}
	if diff := cmp.Diff(want, cases); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got.Tests != 4 || got.Failures != 1 || got.Skipped != 1 || len(got.Suites) != 2 || got.Suites[0].Tests != 3 {
		t.Errorf("counts: %d tests, %d failures, %d skipped, %d suites", got.Tests, got.Failures, got.Skipped, len(got.Suites))
	}
}
