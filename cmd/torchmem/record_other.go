//go:build !unix

package main

import (
	"errors"
	"fmt"
	"io"
)

// childExit is how the recorded command ended.
type childExit struct{ code int }

func (e childExit) signalled() bool { return false }

func (e childExit) String() string { return fmt.Sprintf("exited with status %d", e.code) }

// runChild: recording needs Unix process control (signals, process groups).
func runChild(args, env []string, stdin io.Reader, stdout, stderr io.Writer, state string) (childExit, error) {
	return childExit{}, &exitError{exitInput, errors.New("record: supported on Linux and macOS only")}
}
