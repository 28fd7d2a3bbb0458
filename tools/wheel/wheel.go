package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pythonFiles is the torchmem Python package: find_torchmem_bin and
// python -m torchmem.
//
//go:embed python/torchmem/*.py
var pythonFiles embed.FS

// project is what every wheel's metadata says about torchmem.
type project struct {
	summary     string
	url         string   // the repository, for Project-URL
	readme      string   // the long description (Markdown)
	licenses    []string // files shipped in .dist-info/licenses/
	license     string   // SPDX expression
	modified    time.Time
	requiresPy  string
	classifiers []string
}

// file is one file of a wheel.
type file struct {
	name string
	data []byte
	mode fs.FileMode
}

// wheelName is the file name of a wheel (PEP 427): name, version, then the
// python, ABI and platform tags; the binary works with any Python 3.
func wheelName(version string, p platform) string {
	return fmt.Sprintf("torchmem-%s-py3-none-%s.whl", version, p.tagSuffix())
}

// buildWheel writes the wheel of one binary into dir and returns its path.
// The binary goes in the .data/scripts folder, which pip copies with its
// mode into the environment's bin/ (on the PATH of an activated virtual
// environment, like any console script); the package beside it finds it
// again for python -m torchmem.
func buildWheel(dir, binary, version string, p platform, proj project) (string, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return "", err
	}
	distInfo := "torchmem-" + version + ".dist-info"
	files := []file{}
	err = fs.WalkDir(pythonFiles, "python", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := pythonFiles.ReadFile(name)
		files = append(files, file{strings.TrimPrefix(name, "python/"), data, 0o644})
		return err
	})
	if err != nil {
		return "", err
	}
	files = append(files, file{"torchmem-" + version + ".data/scripts/torchmem", bin, 0o755})
	for _, l := range proj.licenses {
		data, err := os.ReadFile(l)
		if err != nil {
			return "", err
		}
		files = append(files, file{distInfo + "/licenses/" + filepath.Base(l), data, 0o644})
	}
	files = append(files,
		file{distInfo + "/METADATA", []byte(metadata(version, proj)), 0o644},
		file{distInfo + "/WHEEL", []byte(wheelFile(p)), 0o644},
	)
	// RECORD comes last (as PEP 427 recommends, the .dist-info files at the
	// end of the archive), with every other file's hash and size.
	var record strings.Builder
	for _, f := range files {
		sum := sha256.Sum256(f.data)
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.data))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", distInfo)
	files = append(files, file{distInfo + "/RECORD", []byte(record.String()), 0o644})

	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		h := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: proj.modified}
		h.SetMode(f.mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			return "", err
		}
		if _, err := w.Write(f.data); err != nil {
			return "", err
		}
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	out := filepath.Join(dir, wheelName(version, p))
	return out, writeAtomic(out, buf.Bytes())
}

// metadata is the wheel's METADATA (core metadata 2.4): the README is the
// description, under the headers.
func metadata(version string, proj project) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Metadata-Version: 2.4\nName: torchmem\nVersion: %s\nSummary: %s\n", version, proj.summary)
	fmt.Fprintf(&b, "License-Expression: %s\n", proj.license)
	for _, l := range proj.licenses {
		fmt.Fprintf(&b, "License-File: %s\n", filepath.Base(l))
	}
	for _, c := range proj.classifiers {
		fmt.Fprintf(&b, "Classifier: %s\n", c)
	}
	if proj.url != "" {
		fmt.Fprintf(&b, "Project-URL: Homepage, %s\n", proj.url)
		fmt.Fprintf(&b, "Project-URL: Source, %s\n", proj.url)
		fmt.Fprintf(&b, "Project-URL: Issues, %s/issues\n", proj.url)
	}
	fmt.Fprintf(&b, "Requires-Python: %s\n", proj.requiresPy)
	b.WriteString("Description-Content-Type: text/markdown; charset=UTF-8\n\n")
	b.WriteString(proj.readme)
	return b.String()
}

// wheelFile is the wheel's WHEEL: not pure Python (it installs into
// platlib), one Tag line per platform tag.
func wheelFile(p platform) string {
	var b strings.Builder
	b.WriteString("Wheel-Version: 1.0\nGenerator: torchmem tools/wheel\nRoot-Is-Purelib: false\n")
	for _, t := range p.tags {
		fmt.Fprintf(&b, "Tag: py3-none-%s\n", t)
	}
	return b.String()
}

// writeAtomic writes data to a temporary file beside path, then renames it.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
