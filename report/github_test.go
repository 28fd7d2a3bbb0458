package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/check"
	"github.com/torchmem/torchmem/result"
)

func TestGitHubAnnotations(t *testing.T) {
	var buf bytes.Buffer
	if err := GitHubAnnotations(&buf, gateResults(), nil); err != nil {
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

// TestGitHubLocations: a failed check's annotation points at the first of
// its frames (the OOM's request, then its sites) that the repository holds,
// names the sites, and a property value cannot end the command.
func TestGitHubLocations(t *testing.T) {
	b0, b1 := int64(100<<20), int64(0)
	res := []*check.Result{{Input: result.Input{Path: "run.pickle"}, Failed: 3, Checks: []check.Item{
		{Name: "device 0: out of memory", Kind: "oom", Key: "oom", Status: check.CheckFail, Message: "device 0: Out of memory in forward",
			File: "/gpu/box/proj/src/attn.py", Line: 12,
			Sites: []check.CheckSite{{Site: "model.py:3 forward", File: "/gpu/box/proj/src/model.py", Line: 3, Bytes: 1 << 30}}},
		{Name: "device 0: phase:forward vs baseline", Kind: "regression", Key: "phase:forward", Status: check.CheckFail, Message: "forward grew",
			Sites: []check.CheckSite{
				{Site: "<backward: MulBackward0>", Bytes: 300 << 20, Baseline: &b1},
				{Site: "lib.py:9 f", File: "/usr/lib/python3/site-packages/lib.py", Line: 9, Bytes: 200 << 20, Baseline: &b1},
				{Site: "model.py:3 forward", File: "/gpu/box/proj/src/model.py", Line: 3, Bytes: 200 << 20, Baseline: &b0}}},
		{Name: "device 0: peak budget", Kind: "budget", Key: "peak", Status: check.CheckFail, Message: "peak over",
			Sites: []check.CheckSite{{Site: "odd.py:1 g", File: "/x/odd,name.py", Line: 1, Bytes: 5}}},
	}}}
	repo := map[string]string{"/gpu/box/proj/src/model.py": "src/model.py", "/x/odd,name.py": "odd,name.py"}
	var buf bytes.Buffer
	if err := GitHubAnnotations(&buf, res, func(f string) string { return repo[f] }); err != nil {
		t.Fatal(err)
	}
	want := []string{
		// attn.py is not in the repository: the first site that is.
		"::error file=src/model.py,line=3,title=torchmem check::device 0: Out of memory in forward — largest live: model.py:3 forward 1.00 GiB",
		"::error file=src/model.py,line=3,title=torchmem check::forward grew — grew most: <backward: MulBackward0> 0 B → 300 MiB (+300 MiB); " +
			"lib.py:9 f 0 B → 200 MiB (+200 MiB); model.py:3 forward 100 MiB → 200 MiB (+100 MiB)",
		"::error file=odd%2Cname.py,line=1,title=torchmem check::peak over — largest: odd.py:1 g 5 B",
		"::notice title=torchmem check::run.pickle: FAIL: 3 of 3 checks failed (0 passed, 0 skipped)",
	}
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The OOM's own frame wins when the repository has it.
	repo["/gpu/box/proj/src/attn.py"] = "src/attn.py"
	buf.Reset()
	_ = GitHubAnnotations(&buf, res[:1], func(f string) string { return repo[f] })
	if !strings.HasPrefix(buf.String(), "::error file=src/attn.py,line=12,title=") {
		t.Errorf("OOM annotation: %s", buf.String())
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
