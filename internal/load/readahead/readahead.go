// Package readahead runs the Read calls of a reader on a goroutine of its
// own, a few chunks ahead of the decoder that consumes them: the disk,
// gunzip and a sanitiser take the second core instead of the decoder's
// time. Used by the snapshot and chrome-trace readers.
package readahead

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Reader runs the Read calls of a reader (the disk, gunzip, the chrome
// trace sanitiser) on a goroutine of its own, a few chunks ahead of the
// decoder that consumes them, so that this work takes the second core
// instead of the decoder's time. The bytes and errors the decoder sees are
// exactly those of the reader; only their timing changes.
type Reader struct {
	full chan aheadChunk // chunks read, in order
	free chan []byte     // buffers the consumer is done with
	done chan struct{}   // closed by Stop: the producer quits
	gone chan struct{}   // closed by the producer as it returns
	cur  aheadChunk      // the chunk being consumed
	off  int             // bytes of cur consumed
	n    int64           // bytes delivered to the consumer (Delivered)
}

// aheadChunk is one buffer of input and the error that ended it, if any.
type aheadChunk struct {
	b   []byte
	err error
	// tag is what the producer's tag function said after reading the
	// chunk (the sanitiser's running count of replaced bytes).
	tag int64
}

// Read-ahead geometry: aheadChunks buffers of aheadChunkBytes (1 MiB in all).
const (
	aheadChunkBytes = 256 << 10
	aheadChunks     = 4
)

// NewReader starts reading r on a goroutine. tag, when not nil, runs on
// that goroutine after each chunk; its value travels with the chunk. The
// caller must call Stop when it stops reading.
func NewReader(r io.Reader, tag func() int64) *Reader {
	ra := &Reader{
		full: make(chan aheadChunk, aheadChunks),
		free: make(chan []byte, aheadChunks),
		done: make(chan struct{}),
		gone: make(chan struct{}),
	}
	for range aheadChunks {
		ra.free <- make([]byte, aheadChunkBytes)
	}
	go ra.produce(r, tag)
	return ra
}

// produce fills free buffers from r and hands them over in order until r
// fails or ends, or Stop is called.
func (ra *Reader) produce(r io.Reader, tag func() int64) {
	defer close(ra.gone)
	for {
		var buf []byte
		select {
		case buf = <-ra.free:
		case <-ra.done:
			return
		}
		n := 0
		var err error
		for n < len(buf) && err == nil {
			var k int
			k, err = safeRead(r, buf[n:])
			n += k
		}
		c := aheadChunk{b: buf[:n], err: err}
		if tag != nil {
			c.tag = tag()
		}
		select {
		case ra.full <- c:
		case <-ra.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// safeRead is r.Read with a panic turned into a one-line read error: the
// decoder's own recover cannot see the producer's goroutine.
func safeRead(r io.Reader, p []byte) (n int, err error) {
	defer func() {
		if v := recover(); v != nil {
			n, err = 0, errors.New("reader failure: "+strings.Join(strings.Fields(fmt.Sprint(v)), " "))
		}
	}()
	return r.Read(p)
}

// Read implements io.Reader on the chunks, in order.
func (ra *Reader) Read(p []byte) (int, error) {
	for ra.off == len(ra.cur.b) {
		if ra.cur.err != nil {
			return 0, ra.cur.err
		}
		if ra.cur.b != nil {
			ra.free <- ra.cur.b[:cap(ra.cur.b)] // never blocks: one slot per buffer
		}
		ra.cur, ra.off = <-ra.full, 0
	}
	n := copy(p, ra.cur.b[ra.off:])
	ra.off += n
	ra.n += int64(n)
	return n, nil
}

// Stop tells the producer to quit and waits until it has: after Stop, the
// readers below (their byte counts, the progress callback) are the
// caller's again. A producer in the middle of a Read returns when that Read
// does (at once for a file; for a pipe, when its writer writes or closes).
func (ra *Reader) Stop() {
	close(ra.done)
	<-ra.gone
}

// Delivered is the number of bytes Read has handed to the consumer.
func (ra *Reader) Delivered() int64 { return ra.n }

// Tag is what the tag function said after reading the chunk being
// consumed (0 before the first Read, or without a tag function).
func (ra *Reader) Tag() int64 { return ra.cur.tag }
