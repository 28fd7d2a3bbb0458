package report

import (
	"encoding/xml"
	"fmt"
	"io"

	"github.com/torchmem/torchmem/check"
)

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// JUnit writes check results as JUnit XML: one <testsuite> per input, one
// <testcase> per check, a <failure> with the message for a failed check
// and <skipped> for one that could not be evaluated.
func JUnit(w io.Writer, results []*check.Result) error {
	all := junitSuites{Name: "torchmem check"}
	for _, c := range results {
		s := junitSuite{Name: "torchmem check " + c.Input.Path, Tests: len(c.Checks), Failures: c.Failed, Skipped: c.Skipped}
		for _, it := range c.Checks {
			tc := junitCase{Name: it.Name, Classname: "torchmem." + it.Kind}
			switch it.Status {
			case check.CheckFail:
				text := fmt.Sprintf("%s\nactual: %d\nlimit: %d\n", it.Message, it.Actual, it.Limit)
				if st := sitesText(it); st != "" {
					text += st + "\n"
				}
				tc.Failure = &junitFailure{Message: it.Message, Type: it.Kind, Text: text}
			case check.CheckSkip:
				tc.Skipped = &junitSkipped{Message: it.Message}
			default:
				tc.SystemOut = it.Message
			}
			s.Cases = append(s.Cases, tc)
		}
		all.Tests += s.Tests
		all.Failures += s.Failures
		all.Skipped += s.Skipped
		all.Suites = append(all.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
