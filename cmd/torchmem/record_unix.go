//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// childExit is how the recorded command ended.
type childExit struct {
	code   int         // the status torchmem exits with
	signal unix.Signal // the signal that killed it, 0 if it exited
}

func (e childExit) signalled() bool { return e.signal != 0 }

func (e childExit) String() string {
	if e.signal != 0 {
		return fmt.Sprintf("was killed by %s (exit status %d, 128+%d as shells report it)", unix.SignalName(e.signal), e.code, int(e.signal))
	}
	return fmt.Sprintf("exited with status %d", e.code)
}

// terminalSignals reach the command without torchmem when they come from
// the terminal: the kernel sends them to the whole foreground process group,
// and the command is in torchmem's.
var terminalSignals = map[os.Signal]bool{unix.SIGINT: true, unix.SIGQUIT: true, unix.SIGHUP: true}

// runChild runs the command in torchmem's process group with the standard
// streams given, passes signals on while it runs, and returns how it ended.
// An error is returned only when it could not start (exit 127 or 126, as
// shells use).
func runChild(args, env []string, stdin io.Reader, stdout, stderr io.Writer, state string) (childExit, error) {
	c := exec.Command(args[0], args[1:]...)
	c.Env, c.Stdin, c.Stdout, c.Stderr = env, stdin, stdout, stderr

	// A signal the command would have found ignored stays ignored (nohup).
	var sigs []os.Signal
	for _, s := range []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2} {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, sigs...)
	defer signal.Stop(ch)

	if err := c.Start(); err != nil {
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = 127
		}
		return childExit{}, &exitError{code, fmt.Errorf("record: cannot run %s: %w", args[0], unwrapExec(err))}
	}
	fromTerminal := inTerminalForeground()
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-ch:
				switch {
				case s == unix.SIGUSR1:
					dumpNow(state, stderr)
				case terminalSignals[s] && fromTerminal:
					// the terminal sent it to the command too
				default:
					_ = c.Process.Signal(s)
				}
			case <-done:
				return
			}
		}
	}()
	err := c.Wait()
	close(done)
	if c.ProcessState == nil {
		return childExit{}, &exitError{exitInput, fmt.Errorf("record: %w", err)}
	}
	if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return childExit{code: 128 + int(ws.Signal()), signal: unix.Signal(ws.Signal())}, nil
	}
	return childExit{code: c.ProcessState.ExitCode()}, nil
}

// unwrapExec keeps the reason of a failed start without Go's "exec:" prefix.
func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// inTerminalForeground reports whether torchmem has a controlling terminal
// whose foreground process group is its own.
func inTerminalForeground() bool {
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return false
	}
	defer tty.Close()
	pgrp, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}

// dumpNow sends SIGUSR1 to every live process whose hook handles it, so
// each writes its snapshot now. The command itself gets nothing when no
// process handles it yet: SIGUSR1's default action would kill it.
func dumpNow(state string, stderr io.Writer) {
	n := 0
	for _, pid := range readHookStatus(state).usr1Pids() {
		if unix.Kill(pid, unix.SIGUSR1) == nil {
			n++
		}
	}
	if n == 0 {
		fmt.Fprintln(stderr, "torchmem: SIGUSR1: no process is recording yet; nothing to dump")
	}
}
