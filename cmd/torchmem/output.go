package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// outputWriter passes writes on to w and keeps the first error: a full disk
// or a closed stdout ends the run in a failure even where a writer ignored
// the error (torchmem analyze >&- exited 0).
type outputWriter struct {
	w   io.Writer
	err error
}

func (o *outputWriter) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		o.err = err
	}
	return n, err
}

// writeFileAtomic writes data to path (-o of report, merge, the baseline of
// check --update-baseline). A regular file, or a path that does not exist
// yet, is written through a temporary file in the same folder renamed over
// it, so that a failed run never leaves half a report. Anything else — a
// symbolic link, a device such as /dev/null or /dev/stdout, a FIFO — is
// opened and written to, never replaced: renaming over /dev/null replaced
// the machine's device node with a regular file, and over a link, the link.
func writeFileAtomic(path string, data []byte) error {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return replaceFile(path, data, 0o644)
	case err != nil:
		return err
	case st.Mode().IsRegular():
		return replaceFile(path, data, st.Mode().Perm())
	case st.IsDir():
		return errors.New("is a directory")
	}
	return writeThrough(path, data)
}

// replaceFile writes data to a temporary file beside path and renames it
// over path, with permissions perm.
func replaceFile(path string, data []byte, perm fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".torchmem-report-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeThrough opens path (following a link) and writes data to it: a
// link's target is truncated first, a device or FIFO just written to.
func writeThrough(path string, data []byte) error {
	flag := os.O_WRONLY
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		flag |= os.O_TRUNC
	} else if errors.Is(err, fs.ErrNotExist) {
		flag |= os.O_CREATE // a dangling link: create its target
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// outputError is the one line of a failed write of the output.
func outputError(err error) error {
	return fmt.Errorf("cannot write the output: %w", err)
}

// refuseOverwritingInput fails when out (-o of report or merge, check's
// --junit) is one of the inputs, or a link or another name of one: the run
// would replace the file it reads. It is checked before anything is read,
// so that the input is never lost. "-" and paths that do not exist yet
// name no input.
func refuseOverwritingInput(flag, out string, inputs []string) error {
	if out == "" || out == "-" {
		return nil
	}
	ost, err := os.Stat(out)
	if err != nil {
		return nil
	}
	for _, in := range inputs {
		if in == "-" {
			continue
		}
		if ist, err := os.Stat(in); err == nil && os.SameFile(ost, ist) {
			return &exitError{exitInput, fmt.Errorf("%s %s: is the input %s; the output would replace it", flag, out, in)}
		}
	}
	return nil
}
