package pickle

import (
	"maps"
	"math"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/torchmem/torchmem/snapshot"
)

// This file is the second decoder. A snapshot's trace is most of its bytes,
// and the template (template.go) reads its entries one after another on one
// core. Once the main decoder (A) reads a device's trace by a template, from
// a file mapped whole into memory, a second one (B) starts on another
// goroutine at an entry about halfway through what is left, and reads
// entries by the same template into state of its own while A reads up to
// there. When A reaches that entry, B stops; A checks that what B relied on
// still holds (no memo slot was overwritten, the same list is open below the
// same MARK, every bound A would apply holds), appends what B memoized,
// interns B's stacks, streams and strings in B's order (the order in which
// a sequential decoding interns them: the same IDs), and goes on from where
// B stopped. Anything else and B's work is dropped: A reads everything
// itself. Errors are only ever A's, so they are the same either way.

// Tuning of the second decoder.
const (
	// splitMinBytes is the least input left for a second decoder to be
	// worth its start (walking the FRAMEs, copying the memo's chunk list).
	splitMinBytes = 16 << 20
	// splitAfter is how many entries the template takes before one starts
	// (the trace's slice is reserved after reserveAfter entries).
	splitAfter = reserveAfter + 1<<12
	// splitSearch is how far past the halfway point an entry is looked for.
	splitSearch = 1 << 20
	// splitMaxTexts is the most texts a decoder may have for B to start (B
	// gets a copy of their index).
	splitMaxTexts = 1 << 16
	// splitReleaseEvery is how far B moves between releases of the
	// mapped pages behind it.
	splitReleaseEvery = 4 << 20
)

// A stack as B records it, in an event and in a memo slot: one of A's
// (refGlobal | ID), a memo index whose stack it is, resolved at the merge
// (refMemo | index), else one of B's own stacks (its number).
const (
	refGlobal = 1 << 30
	refMemo   = 1 << 31
)

// splitTune are the test hooks of the second decoder: when it starts, the
// least input left, and an offset to start B at instead of looking for one.
type splitTune struct {
	after    int
	minBytes int64
	at       int64 // −1: halfway
	force    bool  // on one core too
	patient  bool  // A waits for B to find its start, and to read all it can before taking its entries
	started  func(*vm)
}

// split is the second decoder: what A hands it, then what it read. B writes
// only its own fields and the events from at on; A reads them once done is
// closed.
type split struct {
	// Set by A before B starts.
	buf     []byte         // the whole input
	target  int            // B starts at the first entry at or after it
	exact   bool           // at target itself (tests)
	tmpl    entryTemplates // A's, those of the memo's generation read
	slots   [][]uint64     // A's memo chunks: the slots below n0 are never written while B runs
	n0      int
	gen     uint64     // the memo's overwrites when B started
	texts   shortTexts // A's texts (t0 of them), B's own after them
	t0      int
	maxStr  int64
	list    *plist             // the list whose entries B reads
	full    []snapshot.Event   // the list's events, to their capacity
	at      int                // where B's events go in full
	events  []snapshot.Event   // full[at:]
	release func(from, to int) // drops mapped pages B has passed (nil: none)

	_       [64]byte      // x and cancel, which A reads at every entry, apart from what B writes
	x       atomic.Int64  // where B started (an entry's EMPTY_DICT); MaxInt64 until then
	ready   chan struct{} // closed once B has looked for where it starts
	cancel  atomic.Bool
	done    chan struct{}
	aborted bool // A dropped B's work (A's field)
	_       [64]byte

	// What B read.
	failed  bool // B stopped on a fault: its work is dropped
	stop    int  // the offset after its last entry
	n       int  // its entries, in events[:n]
	memo    [][]uint64
	nmemo   int
	maxRef  int64    // the most, over fetches of slots from n0 on, of index − slots before (−1: none)
	refs    []uint32 // the events whose stack is such a fetch's
	feats   feature
	charged int64
	slack   int64 // the least, over its entries, of expansionPerByte·offset − charged so far

	// own interns B's stacks, streams and strings, numbered in the order
	// B meets them (0: none, as in the model), for the merge to intern
	// into A's in that order.
	own      *snapshot.Builder
	actions  actionCache
	lastList struct {
		bytes []byte
		stack uint32
	}
	frames []snapshot.FrameID
}

// splitStart starts B after an entry the template took into the list below
// the MARK at mark, when this is the input and the moment for one.
func (m *vm) splitStart(mark int) {
	tune := &m.splitTune
	m.splitAt += reserveAfter // not now: the next try
	l := m.stack[mark-1].list()
	in := m.in
	rest := int64(len(in.buf)) - m.off
	if !in.mapped || m.split != nil || !l.evSized || l.evDone != nil || l.split != nil ||
		rest < tune.minBytes || m.memo.texts.n > splitMaxTexts || l.nEvents == 0 || m.off <= l.evStart {
		return
	}
	target := m.off + rest/2
	if tune.at >= 0 {
		if tune.at <= m.off || tune.at >= int64(len(in.buf)) {
			return
		}
		target = tune.at
	}
	// B's events go as far into the trace's slice as the entries it is
	// expected to read leave room for (at the rate so far, with a margin),
	// past where A's are expected to end when A reaches the target; A
	// reaching them first drops B's work (newEvent), B reaching the
	// slice's end stops it.
	per := float64(m.off-l.evStart) / float64(l.nEvents)
	forA := len(l.events) + int(float64(target-m.off)/per) + 64
	forB := int(float64(int64(len(in.buf))-target)/per*1.015) + 64
	at := max(forA, cap(l.events)-forB)
	if at >= cap(l.events)-64 {
		return
	}
	m.splitAt = math.MaxInt // one second decoder
	s := &split{buf: in.buf, target: int(target), exact: tune.at >= 0, tmpl: m.fast.tmpl,
		slots: slices.Clone(m.memo.chunks), n0: m.memo.n, gen: m.memo.overwrites, t0: m.memo.texts.n,
		maxStr: m.opts.MaxStringBytes, list: l, full: l.events[:cap(l.events)], at: at,
		release: m.release, done: make(chan struct{}), ready: make(chan struct{}), maxRef: -1, slack: math.MaxInt64,
		own: snapshot.NewBuilder(snapshot.Source{})}
	s.events = s.full[at:]
	s.x.Store(math.MaxInt64)
	if s.exact {
		s.x.Store(target) // A may get there before B starts
	}
	s.texts = m.memo.texts.view()
	l.events, l.split = l.events[:len(l.events):at], s
	m.split, m.memo.split = s, s
	go s.run()
	if tune.patient {
		<-s.ready
	}
	if tune.started != nil {
		tune.started(m)
	}
}

// view is a copy of the texts that shares their strings: B interns into it
// without touching A's.
func (t *shortTexts) view() shortTexts {
	v := *t
	v.idx = maps.Clone(t.idx)
	v.text = slices.Clone(t.text)
	if n := len(v.text); n > 0 {
		v.text[n-1] = slices.Clone(v.text[n-1]) // the chunk both would add to
	}
	return v
}

// abort stops B and drops its work (A's goroutine; again is a no-op).
func (s *split) abort() {
	if s.aborted {
		return
	}
	s.aborted = true
	s.cancel.Store(true)
	<-s.done
	if l := s.list; l.split == s {
		l.events, l.split = s.full[:len(l.events)], nil
	}
}

// splitEnd forgets B, its work merged or dropped.
func (m *vm) splitEnd() {
	if s := m.split; s != nil {
		s.abort()
		m.split, m.memo.split = nil, nil
	}
}

// splitJoin is called at an entry's EMPTY_DICT at or past where B started:
// there, A takes B's entries if it can (and says so), else drops them.
func (m *vm) splitJoin() bool {
	s := m.split
	if m.off != s.x.Load() {
		m.splitEnd() // A passed it: B's start was no entry of A's
		return false
	}
	if !m.splitTune.patient {
		s.cancel.Store(true)
	}
	<-s.done
	ok := m.splitMerge(s)

	m.splitEnd()
	return ok
}

// splitMerge appends B's entries to A's when every check holds, as
// sequential decoding would have read them.
func (m *vm) splitMerge(s *split) bool {
	if s.failed || s.n == 0 || s.aborted || s.list.split != s || m.memo.overwrites != s.gen || len(m.marks) == 0 {
		return false
	}
	mark := m.marks[len(m.marks)-1]
	if mark != len(m.stack) || mark == 0 || m.stack[mark-1].k != kList || m.stack[mark-1].list() != s.list {
		return false
	}
	nx := m.memo.len()
	sch := m.sch
	if nx+s.nmemo > m.opts.MaxMemo || s.maxRef >= int64(nx) || s.texts.n-s.t0 > MaxShortTexts-m.memo.texts.n ||
		sch.err != nil || sch.expanded > expansionBase+s.slack ||
		len(m.stack)+sch.generic > m.opts.MaxValues || m.heldBytes() > m.opts.MaxValueBytes {
		return false
	}
	// The stacks of fetched lists: each must be one (else the template
	// would not have read the entry).
	ev := s.events[:s.n]
	for _, i := range s.refs {
		idx := int(ev[i].Stack &^ refMemo)
		var sl uint64
		if idx < nx {
			sl = m.memo.slot(idx)
			if sl&slotMask != slotStack || sl&^slotMask >= refGlobal {
				return false
			}
			sl = slotStack | refGlobal | sl&^slotMask
		} else {
			j := idx - nx
			sl = s.memo[j/memoChunk][j%memoChunk]
			if sl&slotMask != slotStack {
				return false
			}
		}
		ev[i].Stack = snapshot.StackID(sl &^ slotMask)
	}
	// Commit: texts, stacks, streams and strings interned in B's order.
	b := sch.b
	texts := make([]uint32, s.texts.n-s.t0)
	for j := range texts {
		texts[j], _ = m.memo.texts.index(s.texts.at(uint32(s.t0 + j)))
	}
	own := s.own.Snap
	stacks := make([]snapshot.StackID, len(own.Stacks))
	for j, fr := range own.Stacks {
		stacks[j] = b.Stack(fr)
	}
	streams := make([]uint16, len(own.Streams))
	for j, h := range own.Streams {
		streams[j] = b.Stream(h)
	}
	strs := make([]uint32, len(own.Strings))
	for j, str := range own.Strings {
		strs[j] = b.String(str)
	}
	stackOf := func(st uint32) snapshot.StackID {
		if st&refGlobal != 0 {
			return snapshot.StackID(st &^ refGlobal)
		}
		return stacks[st]
	}
	// B's memo slots go into A's memo on another goroutine while A moves
	// B's events into place (neither touches what the other writes).
	var wg sync.WaitGroup
	first := m.memo.extend(s.nmemo)
	chunks := m.memo.chunks
	wg.Go(func() {
		for j := 0; j < s.nmemo; {
			d := first + j
			dst, src := chunks[d/memoChunk][d%memoChunk:], s.memo[j/memoChunk][j%memoChunk:]
			k := min(len(dst), len(src), s.nmemo-j)
			for i, sl := range src[:k] {
				switch sl & slotMask {
				case slotStack:
					sl = slotStack | uint64(stackOf(uint32(sl&^slotMask)))
				case slotStr:
					if t := int(sl &^ slotMask); t >= s.t0 {
						sl = slotStr | uint64(texts[t-s.t0])
					}
				}
				dst[i] = sl
			}
			j += k
		}
	})
	l := s.list
	base := len(l.events)
	dst := s.full[base : base+s.n]
	for i := range ev { // dst is at or before ev: each is read before it is written over
		e := ev[i]
		e.Stack, e.Stream, e.Meta = stackOf(uint32(e.Stack)), streams[e.Stream], strs[e.Meta]
		dst[i] = e
	}
	wg.Wait()
	s.memo = nil
	l.events, l.split = s.full[:base+s.n], nil
	l.nEvents += s.n
	sch.feats |= s.feats
	sch.expanded += s.charged
	m.fast.entries += s.n
	m.fast.templated += s.n
	m.splitTook += s.n
	m.off = int64(s.stop)
	in := m.in
	in.pos, in.end = s.stop, s.stop // the next opcode fills the window from there
	return true
}

// run is B: it finds where to start, then reads entries until it can read
// no more, it is told to stop, or its events are full.
func (s *split) run() {
	defer close(s.done)
	ready := s.ready
	defer func() {
		if ready != nil {
			close(ready)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			s.failed = true // a fault reading the input: A meets it too, and says so
		}
	}()
	buf := s.buf
	pos := s.target
	if !s.exact {
		// The first entry the template reads at or after the target. Its
		// bytes may lie in a string, or in opcodes A reads otherwise: A
		// takes B's work only if it finds an entry there itself.
		for end := min(len(buf), pos+splitSearch); ; pos++ {
			if pos = s.entryStart(buf, pos, end); pos < 0 {
				return
			}
			if _, ok := s.entry(buf, pos, true); ok {
				break
			}
		}
	}
	s.stop = pos
	s.x.Store(int64(pos))
	close(ready)
	ready = nil
	released := pos
	for !s.cancel.Load() && s.n < len(s.events) {
		end, ok := s.entry(buf, pos, false)
		if !ok {
			return
		}
		s.stop = end
		// Between entries: FRAME headers, and APPENDS and MARK between
		// batches; then the next entry's EMPTY_DICT.
		if pos, ok = between(buf, end); !ok {
			return
		}
		if s.release != nil && pos-released >= splitReleaseEvery {
			s.release(released, pos)
			released = pos
		}
	}
}

// entryStart is the first offset from pos on, before end, that may start an
// entry the template reads: EMPTY_DICT, MEMOIZE, MARK and its first key's
// fetch (−1: none).
func (s *split) entryStart(buf []byte, pos, end int) int {
	for ; pos < end-8; pos++ {
		if buf[pos] != '}' || buf[pos+1] != 0x94 || buf[pos+2] != '(' {
			continue
		}
		for i := range s.tmpl.t {
			if tp := &s.tmpl.t[i]; tp.n > 0 && tp.gen == s.gen {
				if _, ok := tp.keys[0].fetchedAt(buf, pos+3); ok {
					return pos
				}
			}
		}
	}
	return -1
}

// between passes what lies between two entries of a list (FRAME headers,
// APPENDS and MARK between batches) to the next entry's EMPTY_DICT; false
// when something else comes first (the list's end).
func between(buf []byte, pos int) (int, bool) {
	for appends := false; ; {
		if pos = skipFrames(buf, pos); pos >= len(buf) {
			return pos, false
		}
		switch c := buf[pos]; {
		case c == 'e' && !appends, c == '(' && appends:
			appends, pos = !appends, pos+1
		case c == '}' && !appends:
			return pos, true
		default:
			return pos, false
		}
	}
}
