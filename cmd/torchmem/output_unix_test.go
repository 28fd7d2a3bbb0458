//go:build unix

package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReportOutputToFIFO: -o to a FIFO writes the page to its reader and
// leaves the FIFO in place.
func TestReportOutputToFIFO(t *testing.T) {
	dir := t.TempDir()
	isPage := func(b []byte) bool { return bytes.HasPrefix(bytes.TrimSpace(b), []byte("<!DOCTYPE html>")) }
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	got := make(chan []byte)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(f)
		f.Close()
		got <- b
	}()
	if code, _, stderr := runCLI(nil, "report", demoSnapshot(), "-o", fifo); code != exitOK {
		t.Fatalf("FIFO: exit %d: %s", code, stderr)
	}
	if b := <-got; !isPage(b) {
		t.Errorf("the FIFO's reader got %.40q", b)
	}
	if st, _ := os.Lstat(fifo); st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced by a %v", st.Mode())
	}
}

// TestReportOutputToDevice: -o given a character device (/dev/null) or a
// link to one writes to the device and leaves the node and the link in
// place; it renamed a temporary file over /dev/null, replacing the
// machine's device node with a regular file. As root (where that rename
// succeeds) the test uses a null device it makes in a temporary folder, so
// that a regression cannot break the machine's /dev/null.
func TestReportOutputToDevice(t *testing.T) {
	dir := t.TempDir()
	dev := os.DevNull
	if os.Geteuid() == 0 {
		dev = filepath.Join(dir, "null")
		var null syscall.Stat_t
		if err := syscall.Stat(os.DevNull, &null); err != nil {
			t.Skipf("no %s: %v", os.DevNull, err)
		}
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, int(null.Rdev)); err != nil {
			t.Skipf("cannot make a device node here: %v", err)
		}
	}
	link := filepath.Join(dir, "link.html")
	if err := os.Symlink(dev, link); err != nil {
		t.Fatal(err)
	}
	inode := func(p string) (uint64, os.FileMode) {
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Ino, st.Mode()
	}
	devIno, _ := inode(dev)
	linkIno, _ := inode(link)
	for _, target := range []string{dev, link} {
		if code, _, stderr := runCLI(nil, "report", demoSnapshot(), "-o", target); code != exitOK {
			t.Fatalf("-o %s: exit %d: %s", target, code, stderr)
		}
		if ino, mode := inode(dev); ino != devIno || mode&os.ModeCharDevice == 0 {
			t.Errorf("-o %s: the device became a %v (inode %d, was %d)", target, mode, ino, devIno)
		}
		if ino, mode := inode(link); ino != linkIno || mode&os.ModeSymlink == 0 {
			t.Errorf("-o %s: the link became a %v", target, mode)
		}
	}
}
