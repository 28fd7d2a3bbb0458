package main

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository's root folder.
func repoRoot() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..")
}

// wheelFiles is a wheel read back: each file's bytes and mode, in order.
type wheelFiles struct {
	names []string
	data  map[string][]byte
	mode  map[string]fs.FileMode
}

// readWheel opens a wheel the way an installer checks it: every file but
// RECORD is listed in RECORD with its SHA-256 (urlsafe base64, no padding)
// and size, RECORD lists nothing else, no name is absolute or climbs out,
// and the .dist-info folder is named for the wheel's name and version.
func readWheel(t *testing.T, path string) wheelFiles {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer zr.Close()
	w := wheelFiles{data: map[string][]byte{}, mode: map[string]fs.FileMode{}}
	for _, f := range zr.File {
		if _, dup := w.data[f.Name]; dup {
			t.Errorf("%s: %s twice", path, f.Name)
		}
		if strings.HasPrefix(f.Name, "/") || strings.Contains("/"+f.Name+"/", "/../") || strings.Contains(f.Name, `\`) {
			t.Errorf("%s: name %q is not a plain relative path", path, f.Name)
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc) // checks the CRC at the end
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %s: %v", path, f.Name, err)
		}
		w.names = append(w.names, f.Name)
		w.data[f.Name], w.mode[f.Name] = data, f.Mode()
	}
	version, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(path), "torchmem-"), "-py3-none-")
	distInfo := "torchmem-" + version + ".dist-info/"
	record, ok := w.data[distInfo+"RECORD"]
	if !ok {
		t.Fatalf("%s: no %sRECORD", path, distInfo)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(string(record), "\n"), "\n") {
		parts := strings.Split(line, ",")
		if len(parts) != 3 {
			t.Errorf("%s: RECORD line %q is not PATH,HASH,SIZE", path, line)
			continue
		}
		listed[parts[0]] = true
		if parts[0] == distInfo+"RECORD" {
			if parts[1] != "" || parts[2] != "" {
				t.Errorf("%s: RECORD lists itself with a hash: %q", path, line)
			}
			continue
		}
		data, ok := w.data[parts[0]]
		if !ok {
			t.Errorf("%s: RECORD lists %s, which the wheel lacks", path, parts[0])
			continue
		}
		sum := sha256.Sum256(data)
		if want := "sha256=" + base64.RawURLEncoding.EncodeToString(sum[:]); parts[1] != want {
			t.Errorf("%s: RECORD's hash of %s is %s, the file's %s", path, parts[0], parts[1], want)
		}
		if parts[2] != strconv.Itoa(len(data)) {
			t.Errorf("%s: RECORD's size of %s is %s, the file's %d", path, parts[0], parts[2], len(data))
		}
	}
	for _, n := range w.names {
		if !listed[n] {
			t.Errorf("%s: %s is not in RECORD", path, n)
		}
	}
	return w
}

// header returns the values of a header in an email-style file (METADATA,
// WHEEL), up to the blank line that ends the headers.
func header(text, key string) []string {
	head, _, _ := strings.Cut(text, "\n\n")
	var vals []string
	for _, line := range strings.Split(head, "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && k == key {
			vals = append(vals, v)
		}
	}
	return vals
}

// goBuild builds a Go program from src for goos/goarch into dir/name.
func goBuild(t *testing.T, dir, name, goos, goarch, cgo, src string) string {
	t.Helper()
	main := filepath.Join(t.TempDir(), "main.go")
	if err := os.WriteFile(main, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, main)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED="+cgo, "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s/%s: %v\n%s", goos, goarch, err, b)
	}
	return out
}
