package main

import (
	"fmt"
	"regexp"
	"strings"
)

// The parts of a version as `git describe --tags --always --dirty` writes
// it (Makefile's VERSION, what torchmem --version prints).
var (
	// release: v1.2.3, 1.2, v2 (a leading "v" or a dot tells a release
	// from an abbreviated commit made of digits only).
	releaseRE = regexp.MustCompile(`^v?(\d+(?:\.\d+)*)`)
	// pre-release: -rc.1, rc1, -beta.2, .alpha, -pre3 (PEP 440's spellings).
	preRE = regexp.MustCompile(`^[-._]?(alpha|a|beta|b|c|rc|preview|pre)[-._]?(\d*)`)
	// commits after the tag: -4-g9f44c7a.
	describeRE = regexp.MustCompile(`-(\d+)-g([0-9a-f]{4,40})$`)
	// an abbreviated commit alone: a checkout without tags.
	commitRE   = regexp.MustCompile(`^[0-9a-f]{4,40}$`)
	localJunk  = regexp.MustCompile(`[^a-z0-9]+`)
	preCanonic = map[string]string{"a": "a", "alpha": "a", "b": "b", "beta": "b", "c": "rc", "rc": "rc", "pre": "rc", "preview": "rc"}
)

// pep440 turns a git-describe version into the PEP 440 version a wheel
// must carry, keeping what tells builds apart:
//
//	v1.2.3                  1.2.3
//	v1.2.3-rc.1             1.2.3rc1
//	v1.2.3-4-g9f44c7a       1.2.3.post4+g9f44c7a   (4 commits after the tag)
//	v1.2.3-4-g9f44c7a-dirty 1.2.3.post4+g9f44c7a.dirty
//	9f44c7a                 0.0.0+g9f44c7a         (a checkout without tags)
//	dev                     0.0.0+dev              (not built in a checkout)
//	v1.2.3-test             1.2.3+test             (anything else: a local label)
//
// Only the first two forms are public versions: PyPI refuses local ones
// (after "+"), so a wheel for PyPI is built from a tagged commit.
func pep440(version string) (string, error) {
	v := strings.ToLower(strings.TrimSpace(version))
	if v == "" {
		return "", fmt.Errorf("version %q: empty", version)
	}
	var local []string
	dirty := false
	if rest, ok := strings.CutSuffix(v, "-dirty"); ok {
		v, dirty = rest, true
	}
	post := ""
	if m := describeRE.FindStringSubmatch(v); m != nil {
		post, local = m[1], append(local, "g"+m[2])
		v = v[:len(v)-len(m[0])]
	}
	release := "0.0.0"
	isRelease := false
	if m := releaseRE.FindStringSubmatch(v); m != nil && (strings.HasPrefix(v, "v") || strings.Contains(m[1], ".")) {
		release, isRelease = m[1], true
		v = v[len(m[0]):]
	}
	pre := ""
	if isRelease {
		if m := preRE.FindStringSubmatch(v); m != nil && !startsWithLetter(v[len(m[0]):]) {
			n := m[2]
			if n == "" {
				n = "0"
			}
			pre = preCanonic[m[1]] + trimZeros(n)
			v = v[len(m[0]):]
		}
	} else if commitRE.MatchString(v) {
		v = "g" + v
	}
	// What is left (a suffix such as -test, or a name such as dev) is a
	// label of its own, first among the local ones.
	if label := strings.Trim(localJunk.ReplaceAllString(v, "."), "."); label != "" {
		local = append([]string{label}, local...)
	}
	if !isRelease && len(local) == 0 {
		return "", fmt.Errorf("version %q: no release, commit or name in it", version)
	}
	if dirty {
		local = append(local, "dirty")
	}
	out := normalRelease(release) + pre
	if post != "" {
		out += ".post" + trimZeros(post)
	}
	if len(local) > 0 {
		out += "+" + strings.Join(local, ".")
	}
	return out, nil
}

// normalRelease drops leading zeros from each part of a release (PEP 440
// compares 01.2 as 1.2 and writes it so).
func normalRelease(r string) string {
	parts := strings.Split(r, ".")
	for i, p := range parts {
		parts[i] = trimZeros(p)
	}
	return strings.Join(parts, ".")
}

func trimZeros(n string) string {
	n = strings.TrimLeft(n, "0")
	if n == "" {
		return "0"
	}
	return n
}

// startsWithLetter tells "rc1" (a pre-release) from "alphabet" (a name).
func startsWithLetter(s string) bool { return s != "" && s[0] >= 'a' && s[0] <= 'z' }
