package kineto

import (
	"encoding/binary"
	"math"

	"github.com/torchmem/torchmem/internal/load/jsonlex"
)

// The chrome trace reader runs in three stages on as many goroutines: the
// read-ahead (disk, gunzip; package readahead), the lexing (the events'
// fast path, fastlex.go, which does the sanitiser's work on the events as
// it reads them, or the sanitiser and the JSON decoder: the fields of each
// event into a batch), and the recording of the events a batch holds
// (record: interning names and threads, parsing numbers, filing spans and
// [memory] events). Batches keep the events in file order, so the result
// is exactly that of one goroutine.

// eventBatch is a run of decoded events and the text of their fields.
type eventBatch struct {
	evs   []rawEvent
	seqs  []int32
	arena []byte
}

// Pipeline geometry: batches of eventBatchLen events, eventBatches in flight.
const (
	eventBatchLen = 1024
	eventBatches  = 3
)

// recordPipe connects readEvent to the recording goroutine.
type recordPipe struct {
	full  chan *eventBatch // batches to record, in order; closed at the end
	free  chan *eventBatch // batches recorded
	done  chan any         // the recording goroutine's panic (or nil) as it ends
	batch *eventBatch      // the batch being filled
}

// startRecording starts the recording goroutine for a run of events.
func (tr *traceReader) startRecording() {
	p := &recordPipe{
		full: make(chan *eventBatch, eventBatches),
		free: make(chan *eventBatch, eventBatches),
		done: make(chan any, 1),
	}
	for range eventBatches - 1 {
		p.free <- &eventBatch{}
	}
	p.batch = &eventBatch{arena: tr.arena[:0]}
	tr.arena = p.batch.arena
	tr.rec = p
	go tr.recordBatches(p)
}

// queue hands the event just decoded (tr.ev, its text in tr.arena) over.
func (tr *traceReader) queue() {
	p := tr.rec
	b := p.batch
	b.evs = append(b.evs, tr.ev)
	b.seqs = append(b.seqs, tr.seq)
	if len(b.evs) < eventBatchLen {
		return
	}
	b.arena = tr.arena
	p.full <- b
	b = <-p.free
	b.evs, b.seqs, b.arena = b.evs[:0], b.seqs[:0], b.arena[:0]
	p.batch = b
	tr.arena = b.arena
}

// stopRecording hands over the last batch, waits until every event is
// recorded and returns the recording goroutine's panic, if it had one.
func (tr *traceReader) stopRecording() any {
	p := tr.rec
	if p == nil {
		return nil
	}
	if len(p.batch.evs) > 0 {
		p.batch.arena = tr.arena
		p.full <- p.batch
	}
	close(p.full)
	panicked := <-p.done
	tr.rec = nil
	tr.arena = tr.arena[:0]
	return panicked
}

// recordBatches records the events of each batch in order. After a panic it
// only recycles batches, so the decoder never blocks; the panic is handed to
// stopRecording.
func (tr *traceReader) recordBatches(p *recordPipe) {
	var panicked any
	for b := range p.full {
		if panicked == nil {
			panicked = tr.recordBatch(b)
		}
		p.free <- b // never blocks: one slot per batch
	}
	p.done <- panicked
}

// recordBatch records one batch, returning a panic as a value.
func (tr *traceReader) recordBatch(b *eventBatch) (panicked any) {
	defer func() { panicked = recover() }()
	tr.recArena = b.arena
	for i := range b.evs {
		tr.recEv, tr.recSeq = &b.evs[i], b.seqs[i]
		tr.record()
	}
	tr.recEv, tr.recArena = nil, nil
	return nil
}

// recBytes is the text of a field of the event being recorded.
func (tr *traceReader) recBytes(f field) []byte {
	if f.n < 0 {
		return nil
	}
	return tr.recArena[f.off : f.off+f.n]
}

// recInt is jsonlex.ParseInt of a field of the event being recorded.
func (tr *traceReader) recInt(f field) (int64, bool) {
	if f.n == numField {
		return int64(binary.LittleEndian.Uint64(tr.recArena[f.off:])), true
	}
	return jsonlex.ParseInt(tr.recBytes(f))
}

// recUint is jsonlex.ParseUint of a field of the event being recorded.
func (tr *traceReader) recUint(f field) (uint64, bool) {
	if f.n == numField {
		v := int64(binary.LittleEndian.Uint64(tr.recArena[f.off:]))
		return uint64(v), v >= 0
	}
	return jsonlex.ParseUint(tr.recBytes(f))
}

// recTime is parseTimeNS of a field of the event being recorded: a plain
// integer is microseconds, and fails as parseTimeNS does past int64
// nanoseconds.
func (tr *traceReader) recTime(f field) (int64, bool) {
	if f.n == numField {
		us := int64(binary.LittleEndian.Uint64(tr.recArena[f.off:]))
		if us > math.MaxInt64/1000 || us < -(math.MaxInt64/1000) {
			return 0, false
		}
		return us * 1000, true
	}
	return parseTimeNS(tr.recBytes(f))
}
