package main

import (
	"os"
	"path/filepath"
	"strings"
)

// repositoryRoot is the folder whose files --github annotations may point
// at: --source-root when given, else $GITHUB_WORKSPACE (where
// actions/checkout puts the repository), else the nearest folder at or
// above the working directory that holds .git, else "" (no locations).
func repositoryRoot(flag string) string {
	if flag != "" {
		return flag
	}
	if ws := os.Getenv("GITHUB_WORKSPACE"); ws != "" {
		return ws
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Bounds of matching frames' files to the repository: only a path's last
// maxSourceComponents components are tried as tails (a repository's files
// lie fewer folders deep), each at most maxSourcePath bytes long (PATH_MAX),
// and one run makes at most maxSourceLookups lookups: a check's
// annotations name a few dozen files, and a hostile frame path of 100,000
// components took one Stat each, each of a path as long, on the CI job's
// time.
const (
	maxSourceComponents = 32
	maxSourcePath       = 4096
	maxSourceLookups    = 4096
)

// statFile looks a path up (os.Stat; tests count the calls).
var statFile = os.Stat

// sourceLocator maps a frame's file, as the machine that recorded the
// snapshot wrote it (/home/ci/work/proj/src/model.py, C:\proj\model.py,
// src/model.py), to the path of the same file in the repository at root,
// relative to root with forward slashes, or "" when the repository has no
// such file. The file's longest tail of path components that names a
// regular file inside root wins: recording machines put the checkout
// anywhere, but the repository's own layout is the tail of the path.
// Frame names are untrusted: ".." components never match, and the result
// is always inside root. The work is linear in the path and bounded per
// run (maxSourceLookups); past the bound files are not located.
func sourceLocator(root string) func(string) string {
	if root == "" {
		return nil
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil
	}
	cache := map[string]string{}
	lookups := 0
	return func(file string) string {
		if rel, ok := cache[file]; ok {
			return rel
		}
		if lookups >= maxSourceLookups {
			return ""
		}
		rel, n := locateTail(abs, file, maxSourceLookups-lookups)
		lookups += n
		if len(cache) < maxSourceLookups {
			cache[file] = rel
		}
		return rel
	}
}

// locateIn is the repository path of file under root, or "" (sourceLocator).
func locateIn(root, file string) string {
	rel, _ := locateTail(root, file, maxSourceComponents)
	return rel
}

// locateTail tries the tails of file's last maxSourceComponents components
// under root, longest first, with at most budget lookups, and returns the
// first that names a regular file and the lookups made. One pass over the
// path finds its components; a ".." or a NUL anywhere matches nothing.
func locateTail(root, file string, budget int) (string, int) {
	var parts []string // the last maxSourceComponents components
	all := true        // parts starts at the path's first component
	rest := strings.ReplaceAll(file, "\\", "/")
	for rest != "" {
		var p string
		p, rest, _ = strings.Cut(rest, "/")
		switch {
		case p == ".." || strings.ContainsRune(p, 0):
			return "", 0
		case p == "" || p == ".":
			continue
		}
		if len(parts) == maxSourceComponents {
			parts, all = parts[1:], false
		}
		parts = append(parts, p)
	}
	lookups := 0
	for i := range parts {
		tail := parts[i:]
		if i == 0 && all && strings.HasSuffix(parts[0], ":") { // a Windows drive, C:
			continue
		}
		if lookups >= budget {
			break
		}
		p := filepath.Join(append([]string{root}, tail...)...)
		if len(p) > maxSourcePath {
			continue
		}
		if r, err := filepath.Rel(root, p); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			continue
		}
		lookups++
		if st, err := statFile(p); err == nil && st.Mode().IsRegular() {
			return strings.Join(tail, "/"), lookups
		}
	}
	return "", lookups
}
