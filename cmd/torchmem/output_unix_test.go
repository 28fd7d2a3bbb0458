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
