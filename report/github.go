package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/snapshot"
)

// githubTitle is the title of every annotation torchmem writes.
const githubTitle = "torchmem check"

// GitHubAnnotations writes GitHub Actions workflow commands: an ::error
// annotation per failed check, a ::warning per skipped one and a ::notice
// with the summary of each input.
func GitHubAnnotations(w io.Writer, results []*analysis.CheckResult) error {
	p := &printer{w: w}
	for _, c := range results {
		for _, it := range c.Checks {
			switch it.Status {
			case analysis.CheckFail:
				p.f("::error title=%s::%s\n", githubProperty(githubTitle), githubData(it.Message))
			case analysis.CheckSkip:
				p.f("::warning title=%s::%s\n", githubProperty(githubTitle), githubData(it.Message))
			}
		}
		p.f("::notice title=%s::%s\n", githubProperty(githubTitle), githubData(fmt.Sprintf("%s: %s", c.Input.Path, CheckSummary(c))))
	}
	return p.err
}

// githubData escapes the message of a workflow command so that it stays
// one command: %, CR and LF are percent-encoded, other control characters
// are shown as \xNN.
func githubData(s string) string {
	s = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
	return snapshot.OneLine(s)
}

// githubProperty escapes a property value of a workflow command (also : and ,).
func githubProperty(s string) string {
	return strings.NewReplacer(":", "%3A", ",", "%2C").Replace(githubData(s))
}
