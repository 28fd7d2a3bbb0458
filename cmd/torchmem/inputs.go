package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/snapshot"
)

// expandInputs turns the inputs of the command line into files: a file as
// given, "-" (standard input, at most once), and a folder as every file
// below it, recursively and in name order, whose start (after gzip) take
// accepts; what is a folder's file is decided by content, never by name.
// A folder without any such file is an error, naming what was wanted.
func expandInputs(args []string, take func(head []byte) bool, want string) ([]string, error) {
	var out []string
	stdin := false
	for _, arg := range args {
		if arg == "-" {
			if stdin {
				return nil, &exitError{exitInput, fmt.Errorf("-: standard input given twice")}
			}
			stdin = true
			out = append(out, arg)
			continue
		}
		st, err := os.Stat(arg)
		if err != nil || !st.IsDir() {
			out = append(out, arg) // the reader words what is wrong with it
			continue
		}
		found := 0
		err = filepath.WalkDir(arg, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			if !d.Type().IsRegular() { // a link: followed to a file, never to a folder
				if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
					return nil
				}
			}
			head, err := load.Head(path)
			if err != nil {
				return err
			}
			if take(head) {
				out = append(out, path)
				found++
			}
			return nil
		})
		if err != nil {
			if snapshot.IsInputError(err) {
				return nil, err
			}
			return nil, &exitError{exitInput, cleanWalkError(err)}
		}
		if found == 0 {
			return nil, &exitError{exitInput, fmt.Errorf("%s: no %s in this folder or below it", arg, want)}
		}
	}
	return out, nil
}

// cleanWalkError words an error met walking a folder: the path, then what.
func cleanWalkError(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return err
}
