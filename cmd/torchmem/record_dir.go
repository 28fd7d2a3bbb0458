package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/torchmem/torchmem/internal/units"
)

// recordDir is the folder torchmem record writes into, checked before the
// command starts and held open until the last page is written, so that
// hours of training never end in a folder that cannot be written, and
// nothing is written through a link planted in it meanwhile.
type recordDir struct {
	path    string // absolute
	created bool   // made by this run (removed again if left empty)
	root    *os.Root
}

// recordOwnName is a name torchmem record writes into its folder: the
// hooks' snapshots and traces, the reports, and temporary files.
var recordOwnName = regexp.MustCompile(`^(?:(?:oom_)?snapshot_rank[0-9]+_[0-9]+\.pickle|trace_rank[0-9]+_[0-9]+\.json\.gz|report(?:_rank[0-9]+_[0-9]+)?\.html|\.torchmem-.+)$`)

// openRecordDir checks -o before the command starts: the folder is created,
// or is an existing folder — not a link — that is empty or holds only what
// torchmem record writes (an earlier recording), and can be written.
// Anything else is refused with exit status 2 at once.
func openRecordDir(name string) (*recordDir, error) {
	refuse := func(format string, args ...any) error {
		return &exitError{exitInput, fmt.Errorf("record: -o %s: %s", units.OneLine(name), fmt.Sprintf(format, args...))}
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, refuse("%v", err)
	}
	d := &recordDir{path: abs}
	st, err := os.Lstat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return nil, refuse("cannot create the folder: %v", pathErr(err))
		}
		d.created = true
		if st, err = os.Lstat(abs); err != nil {
			return nil, refuse("%v", pathErr(err))
		}
	case err != nil:
		return nil, refuse("%v", pathErr(err))
	case st.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(abs)
		return nil, refuse("is a symbolic link (to %s); name the folder itself", units.OneLine(target))
	case !st.IsDir():
		return nil, refuse("exists and is not a folder; name a new or empty folder")
	}
	if !d.created {
		if why := foreignEntry(abs); why != "" {
			return nil, refuse("%s; name a new or empty folder", why)
		}
	}
	if d.root, err = os.OpenRoot(abs); err != nil {
		return nil, refuse("%v", pathErr(err))
	}
	if now, err := d.root.Stat("."); err != nil || !os.SameFile(st, now) {
		d.root.Close()
		return nil, refuse("the folder changed while it was checked")
	}
	if err := d.probe(); err != nil {
		d.close()
		return nil, refuse("cannot be written: %v", pathErr(err))
	}
	return d, nil
}

// foreignEntry says what in folder is not torchmem record's own (a link,
// a folder, another file), or "" when it holds nothing else.
func foreignEntry(folder string) string {
	f, err := os.Open(folder)
	if err != nil {
		return pathErr(err).Error()
	}
	defer f.Close()
	for {
		entries, err := f.ReadDir(256)
		for _, e := range entries {
			switch {
			case e.Type()&fs.ModeSymlink != 0:
				return fmt.Sprintf("holds a symbolic link, %s", units.OneLine(e.Name()))
			case !e.Type().IsRegular() || !recordOwnName.MatchString(e.Name()):
				return fmt.Sprintf("holds %s, which torchmem record did not write", units.OneLine(e.Name()))
			}
		}
		if errors.Is(err, io.EOF) || err == nil && len(entries) == 0 {
			return ""
		}
		if err != nil {
			return pathErr(err).Error()
		}
	}
}

// probe writes and removes a file, to know the folder can be written.
func (d *recordDir) probe() error {
	name, f, err := d.createTemp("probe")
	if err != nil {
		return err
	}
	f.Close()
	return d.root.Remove(name)
}

// createTemp creates a new file of a name no one else has, in the folder.
func (d *recordDir) createTemp(what string) (string, *os.File, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := ".torchmem-" + what + "-" + hex.EncodeToString(b[:]) + ".tmp"
	f, err := d.root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	return name, f, err
}

// write writes data as the folder's file name: a temporary file renamed
// over it, so that a link planted at that name is replaced, never
// followed, and a failed write leaves no half page.
func (d *recordDir) write(name string, data []byte) error {
	tmp, f, err := d.createTemp(strings.TrimSuffix(name, filepath.Ext(name)))
	if err != nil {
		return pathErr(err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.root.Rename(tmp, name)
	}
	if err != nil {
		_ = d.root.Remove(tmp)
		return pathErr(err)
	}
	return nil
}

// close lets the folder go, and removes it when this run created it and
// nothing was written into it.
func (d *recordDir) close() {
	d.root.Close()
	if d.created {
		_ = os.Remove(d.path)
	}
}

// pathErr drops the path from an error: the message names the folder.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
