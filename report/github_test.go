package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGitHubAnnotations(t *testing.T) {
	var buf bytes.Buffer
	if err := GitHubAnnotations(&buf, gateResults()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		// A newline in a message cannot start a second command; % and the
		// terminal escape are neutralised.
		`::error title=torchmem check::2 leaks at evil.py:1 </failure>]]> %250A%0A::error::x \x1b[31m`,
		`::warning title=torchmem check::no optimizer phase`,
		`::notice title=torchmem check::run <a>&"b".pickle: FAIL: 1 of 3 checks failed (1 passed, 1 skipped)`,
		`::notice title=torchmem check::other.json: PASS: 1 check passed`,
	}
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestGitHubEscaping(t *testing.T) {
	cases := []struct {
		in, data, prop string
	}{
		{"plain", "plain", "plain"},
		{"50% a,b: c", "50%25 a,b: c", "50%25 a%2Cb%3A c"},
		{"a\r\nb", "a%0D%0Ab", "a%0D%0Ab"},
		{"bell\a", `bell\x07`, `bell\x07`},
	}
	for _, c := range cases {
		if got := githubData(c.in); got != c.data {
			t.Errorf("githubData(%q) = %q, want %q", c.in, got, c.data)
		}
		if got := githubProperty(c.in); got != c.prop {
			t.Errorf("githubProperty(%q) = %q, want %q", c.in, got, c.prop)
		}
	}
}
