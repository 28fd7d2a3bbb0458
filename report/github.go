package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/torchmem/torchmem/check"
	"github.com/torchmem/torchmem/internal/units"
)

// githubTitle is the title of every annotation torchmem writes.
const githubTitle = "torchmem check"

// GitHubAnnotations writes GitHub Actions workflow commands: an ::error
// annotation per failed check, a ::warning per skipped one and a ::notice
// with the summary of each input. A failed check's annotation names the
// sites that grew most and points (file=, line=) at the code it is about —
// an OOM's failed request, else the first of its sites that locate finds
// in the repository — so that it shows on the pull request's diff. locate
// maps a frame's file, as the recording machine wrote it, to a path
// relative to the repository's root, or "" (nil: no locations).
func GitHubAnnotations(w io.Writer, results []*check.Result, locate func(file string) string) error {
	p := &printer{w: w}
	for _, c := range results {
		for _, it := range c.Checks {
			switch it.Status {
			case check.CheckFail:
				msg := it.Message
				if st := sitesText(it); st != "" {
					msg += " — " + st
				}
				p.f("::error %stitle=%s::%s\n", githubLocation(it, locate), githubProperty(githubTitle), githubData(msg))
			case check.CheckSkip:
				p.f("::warning title=%s::%s\n", githubProperty(githubTitle), githubData(it.Message))
			}
		}
		p.f("::notice title=%s::%s\n", githubProperty(githubTitle), githubData(fmt.Sprintf("%s: %s", c.Input.Path, CheckSummary(c))))
	}
	return p.err
}

// githubLocation is "file=PATH,line=N," for the code a failed check points
// at, when locate finds it in the repository; else "".
func githubLocation(it check.Item, locate func(string) string) string {
	if locate == nil {
		return ""
	}
	type frame struct {
		file string
		line int64
	}
	frames := []frame{{it.File, it.Line}}
	for _, s := range it.Sites {
		frames = append(frames, frame{s.File, s.Line})
	}
	for _, f := range frames {
		if f.file == "" {
			continue
		}
		if rel := locate(f.file); rel != "" {
			loc := "file=" + githubProperty(rel) + ","
			if f.line > 0 {
				loc += fmt.Sprintf("line=%d,", f.line)
			}
			return loc
		}
	}
	return ""
}

// githubData escapes the message of a workflow command so that it stays
// one command: %, CR and LF are percent-encoded, other control characters
// are shown as \xNN.
func githubData(s string) string {
	s = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
	return units.OneLine(s)
}

// githubProperty escapes a property value of a workflow command (also : and ,).
func githubProperty(s string) string {
	return strings.NewReplacer(":", "%3A", ",", "%2C").Replace(githubData(s))
}
