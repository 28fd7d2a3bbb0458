package snapshottest

import "testing"

// TestNotInert: the checker the escaping tests rely on flags each kind of
// hostile output and passes what an escaped output looks like.
func TestNotInert(t *testing.T) {
	for _, c := range []struct {
		out      string
		markdown bool
		bad      bool
	}{
		{"peak 1.50 GiB\n", false, false},
		{"\x1b[31mred", false, true},
		{"bell\a", false, true},
		{"csi \u009b31m", false, true},
		{"\xff\xfe", false, true},
		{"ok\n  ::error::pwned", false, true},
		{"text ##[error]pwned", false, true},
		{"a <img src=x>", true, true},
		{"a `<img src=x>`", true, false},
		{"a <img src=x>", false, false},
		{`\x1b]0;t`, false, false},
	} {
		if why := NotInert(c.out, c.markdown); (why != "") != c.bad {
			t.Errorf("NotInert(%q, %v) = %q, want bad=%v", c.out, c.markdown, why, c.bad)
		}
	}
}
