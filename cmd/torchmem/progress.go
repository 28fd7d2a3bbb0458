package main

import (
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressThreshold is the input size above which a progress bar is shown.
const progressThreshold = 50 << 20

// newProgress returns a callback that draws a progress bar on stderr while
// a large file is read, or nil when the file is small or stderr is not a
// terminal (CI logs get nothing).
func newProgress(stderr io.Writer, path string, size int64) (func(int64), func()) {
	f, ok := stderr.(*os.File)
	if !ok || size < progressThreshold || !term.IsTerminal(int(f.Fd())) {
		return nil, func() {}
	}
	bar := progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(f),
		progressbar.OptionSetDescription("reading "+path),
		progressbar.OptionShowBytes(true),
		progressbar.OptionThrottle(100e6),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetPredictTime(true),
	)
	return func(n int64) { _ = bar.Set64(n) }, func() { _ = bar.Finish() }
}
