package main

import (
	"regexp"
	"testing"
)

// pep440Canonical is PEP 440's canonical form (its appendix), with the
// local label after "+".
var pep440Canonical = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))*((a|b|rc)(0|[1-9][0-9]*))?(\.post(0|[1-9][0-9]*))?(\.dev(0|[1-9][0-9]*))?(\+[a-z0-9]+(\.[a-z0-9]+)*)?$`)

// versionCases are versions as git describe (or the Makefile) writes them
// and the PEP 440 versions of their wheels. TestWheelInstall also has pip
// parse each.
var versionCases = []struct{ in, want string }{
	{"v1.2.3", "1.2.3"},
	{"1.2.3", "1.2.3"},
	{"V1.2.3", "1.2.3"},
	{"v2", "2"},
	{"v01.02.3", "1.2.3"},
	{"v1.2.3-rc.1", "1.2.3rc1"},
	{"v1.2.3-beta2", "1.2.3b2"},
	{"v1.2.3-alpha", "1.2.3a0"},
	{"v1.2.3-pre.4", "1.2.3rc4"},
	{"v1.2.3-4-g9f44c7a", "1.2.3.post4+g9f44c7a"},
	{"v1.2.3-4-g9f44c7a-dirty", "1.2.3.post4+g9f44c7a.dirty"},
	{"v1.2.3rc1-12-gabcdef0", "1.2.3rc1.post12+gabcdef0"},
	{"v1.2.3-dirty", "1.2.3+dirty"},
	{"9f44c7a", "0.0.0+g9f44c7a"},
	{"9f44c7a-dirty", "0.0.0+g9f44c7a.dirty"},
	{"1234567", "0.0.0+g1234567"}, // an abbreviated commit of digits only, not release 1234567
	{"dev", "0.0.0+dev"},
	{"v9.8.7-test", "9.8.7+test"},
	{"v1.2.3+build.5", "1.2.3+build.5"},
	{"v1.2.3-rc.1-Feature_X-2-g0123abc", "1.2.3rc1.post2+feature.x.g0123abc"},
	{"release-2024", "0.0.0+release.2024"},
	{"v1.2.3-alphabet", "1.2.3+alphabet"},
}

func TestPEP440(t *testing.T) {
	for _, c := range versionCases {
		got, err := pep440(c.in)
		if err != nil || got != c.want {
			t.Errorf("pep440(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
		if !pep440Canonical.MatchString(got) {
			t.Errorf("pep440(%q) = %q is not a canonical PEP 440 version", c.in, got)
		}
	}
	for _, bad := range []string{"", " ", "-", "+++", "-dirty"} {
		if got, err := pep440(bad); err == nil {
			t.Errorf("pep440(%q) = %q, want an error", bad, got)
		}
	}
}
