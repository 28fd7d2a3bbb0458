package load_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	"github.com/torchmem/torchmem/internal/load/loadtest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// gzipMembers is a gzip file of n members, each the compressed chunk, the
// first prefixed: a stream that expands about a thousand times, made in
// milliseconds (gzip(1) reads concatenated members as one stream).
func gzipMembers(prefix, chunk []byte, n int) []byte {
	member := func(b []byte) []byte {
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		w.Write(b)
		w.Close()
		return z.Bytes()
	}
	out := member(append(bytes.Clone(prefix), chunk...))
	rest := member(chunk)
	for range n - 1 {
		out = append(out, rest...)
	}
	return out
}

// TestGzipExpansionBound: with --max-input-bytes left to its default, a
// gzip input stops once it expands past GzipExpansionBase plus
// GzipExpansionRatio times its compressed size — from a file, or from
// standard input (the compressed bytes read so far) — with one line
// naming the option, instead of decoding up to 8 GiB (a 9 MB gzip took 70
// CPU-seconds); with the limit given, that limit holds instead. The real
// gzip files expand 7–30× and read with the default (TestAnalyzeEveryInput).
func TestGzipExpansionBound(t *testing.T) {
	bomb := gzipMembers([]byte("\x80\x04"), bytes.Repeat([]byte("N0"), 2<<20), 32) // 128 MiB of None, POP
	limit := int64(load.GzipExpansionBase + load.GzipExpansionRatio*len(bomb))
	t.Logf("%d bytes of gzip, 128 MiB decompressed: stops past %d", len(bomb), limit)
	for _, size := range []int64{int64(len(bomb)), -1} {
		var err error
		heap := st.HeapAllocated(func() {
			_, err = load.Read(bytes.NewReader(bomb), "bomb.pickle.gz", size, snapshot.Options{})
		})
		what := fmt.Sprintf("size %d", size)
		loadtest.WantInputError(t, err, "bomb.pickle.gz", "gzip input expands past")
		if !strings.Contains(err.Error(), "--max-input-bytes") {
			t.Errorf("%s: %v: does not name --max-input-bytes", what, err)
		}
		if heap > 16<<20 {
			t.Errorf("%s: %d bytes allocated", what, heap)
		}
	}
	// Given, the limit is the one given.
	_, err := load.Read(bytes.NewReader(bomb), "bomb.pickle.gz", int64(len(bomb)), snapshot.Options{MaxInputBytes: 100 << 20})
	if err == nil || !strings.Contains(err.Error(), "gzip input expands past the limit of 104857600 bytes") {
		t.Errorf("with the limit given: %v", err)
	}
}
