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

// sourceLocator maps a frame's file, as the machine that recorded the
// snapshot wrote it (/home/ci/work/proj/src/model.py, C:\proj\model.py,
// src/model.py), to the path of the same file in the repository at root,
// relative to root with forward slashes, or "" when the repository has no
// such file. The file's longest tail of path components that names a
// regular file inside root wins: recording machines put the checkout
// anywhere, but the repository's own layout is the tail of the path.
// Frame names are untrusted: ".." components never match, and the result
// is always inside root.
func sourceLocator(root string) func(string) string {
	if root == "" {
		return nil
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil
	}
	cache := map[string]string{}
	return func(file string) string {
		if rel, ok := cache[file]; ok {
			return rel
		}
		rel := locateIn(abs, file)
		cache[file] = rel
		return rel
	}
}

func locateIn(root, file string) string {
	var parts []string
	for _, p := range strings.Split(strings.ReplaceAll(file, "\\", "/"), "/") {
		switch {
		case p == ".." || strings.ContainsRune(p, 0):
			return ""
		case p != "" && p != ".":
			parts = append(parts, p)
		}
	}
	for i := range parts {
		tail := parts[i:]
		if i == 0 && len(parts) > 0 && strings.HasSuffix(parts[0], ":") { // a Windows drive, C:
			continue
		}
		p := filepath.Join(append([]string{root}, tail...)...)
		if r, err := filepath.Rel(root, p); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			continue
		}
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return strings.Join(tail, "/")
		}
	}
	return ""
}
