package kineto

import (
	"bufio"
	"strconv"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/snapshot"
)

// TestRecordPipelinePanic: a panic while recording a batch reaches the
// decoder's goroutine as a value, after every queued batch was taken (the
// decoder never blocks on a dead recorder).
func TestRecordPipelinePanic(t *testing.T) {
	tr := newTraceReader(bufio.NewReader(strings.NewReader("[]")), snapshot.Source{Path: "p.json"}, snapshot.Options{}, true)
	defer tr.ra.Stop()
	tr.startRecording()
	for range 3*eventBatchLen + 5 {
		tr.ev.reset()
		tr.ev.ph = field{off: 1 << 20, n: 1} // past the end of the arena: recording panics
		tr.queue()
	}
	if p := tr.stopRecording(); p == nil {
		t.Fatal("no panic reported from the recording goroutine")
	}
}

// TestRecordPipelineOrder: events cross batch boundaries in file order.
func TestRecordPipelineOrder(t *testing.T) {
	var b strings.Builder
	b.WriteString(`[`)
	n := 2*eventBatchLen + 7
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"ph": "X", "cat": "cpu_op", "name": "op`)
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString(`", "pid": 1, "tid": 1, "ts": `)
		b.WriteString(strconv.Itoa(i * 10))
		b.WriteString(`, "dur": 5}`)
	}
	b.WriteString(`]`)
	for _, fast := range []bool{false, true} {
		tr := newTraceReader(bufio.NewReader(strings.NewReader(b.String())), snapshot.Source{Path: "p.json"}, snapshot.Options{}, fast)
		if _, err := tr.dec.ReadToken(); err != nil {
			t.Fatal(err)
		}
		if err := tr.readEvents("the top-level array"); err != nil {
			t.Fatal(err)
		}
		tr.ra.Stop()
		if len(tr.threads) != 1 || tr.threads[0].spans.len() != int32(n) {
			t.Fatalf("fast %v: threads %d, spans %d; want 1 thread with %d spans", fast, len(tr.threads), tr.threads[0].spans.len(), n)
		}
		for i := range int32(n) {
			sp := tr.threads[0].spans.at(i)
			if sp.seq != int32(i+1) || sp.start != int64(i)*10_000 || tr.names[sp.name] != "op"+strings.Repeat("x", int(i%7)) {
				t.Fatalf("fast %v: span %d: seq %d start %d name %q", fast, i, sp.seq, sp.start, tr.names[sp.name])
			}
		}
	}
}
