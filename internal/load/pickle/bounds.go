package pickle

import (
	"fmt"
	"math"
	"strconv"
	"unsafe"

	"github.com/torchmem/torchmem/snapshot"
)

// This file bounds what a small pickle can make the decoder hold or do.
// Memo fetches share a value instead of copying it, so a 1 KB pickle can
// describe a structure of gigabytes (lists of the same list, twenty deep).
// Three rules keep that harmless:
//
//   - values outside the model (the stack, generic list items and dict
//     entries, containers not yet reduced) are counted in bytes, and the
//     count is capped (Options.MaxValueBytes);
//   - the strings the schema hashes, compares or copies for the records it
//     reduces are counted too (the expansion budget): past 64 MiB plus 32× the
//     bytes decoded so far the file is refused, so that work follows the input;
//   - text rendered from values (allocator settings, non-string keys) is
//     capped at 1 MiB for the whole file (real files render a few hundred
//     bytes: the allocator's roundup_power2_divisions).

// Sizes counted for values held outside the model.
const (
	valueBytes = int64(unsafe.Sizeof(value{}))
	dictBytes  = int64(unsafe.Sizeof(pdict{}))
	listBytes  = int64(unsafe.Sizeof(plist{}))
	entryBytes = 2 * valueBytes // a dict entry: its key and its value
)

// expansionBase and expansionPerByte set the expansion budget: the bytes of
// strings the schema may handle for records, over the bytes decoded so far.
// Real snapshots use at most 2.6 bytes per byte of file (a frame dict of a
// few bytes of memo fetches names strings of a hundred).
const (
	expansionBase    = 64 << 20
	expansionPerByte = 32
)

// hold counts n more bytes of values held outside the model (negative n
// releases them). It is a no-op on the reference path.
func (s *schema) hold(n int64) {
	if s.m != nil {
		s.m.held += n
	}
}

// release stops counting a generic value the schema is done with (a 2.0
// block's history list and its dicts), down to depth levels; a value
// shared through the memo stays counted.
func (s *schema) release(v value, depth int) {
	if s.m == nil || depth < 0 {
		return
	}
	switch v.k {
	case kList:
		l := v.list()
		if l.gets > 0 || l.stack > 0 {
			return
		}
		l.gets = 1 // released once: never counted off twice
		s.generic -= len(l.items)
		s.hold(-listBytes)
		for _, it := range l.items {
			s.release(it, depth-1)
		}
	case kDict:
		d := v.dict()
		if d.gets > 0 || d.reduced || d.frame > 0 {
			return
		}
		d.gets = 1
		s.hold(-dictBytes - entryBytes*int64(len(d.keys)))
		for _, it := range d.vals {
			s.release(it, depth-1)
		}
	}
}

// heldBytes is what the machine holds outside the model: the stack (its
// capacity: growing it copies), generic list items and the containers
// counted by hold.
func (m *vm) heldBytes() int64 {
	return valueBytes*int64(cap(m.stack)+m.sch.generic) + m.held
}

// maxStackValues is how many values the stack may hold: Options.MaxValues,
// and half of MaxValueBytes in values (its capacity runs ahead of its length).
func maxStackValues(o snapshot.Options) int {
	return int(min(int64(o.MaxValues), o.MaxValueBytes/valueBytes/2))
}

// charge counts n bytes of strings handled for a record against the
// expansion budget; past it the schema fails (once).
func (s *schema) charge(n int) {
	if s.m == nil || s.err != nil {
		return
	}
	s.expanded += int64(n)
	if s.expanded > expansionBase+expansionPerByte*s.m.off {
		s.err = s.m.fail("strings of records expand to %d bytes after %d bytes of pickle (memo references to the same long strings?): not a snapshot PyTorch wrote", s.expanded, s.m.off)
	}
}

// failOnce records the first error the schema meets; the machine stops on it
// after the opcode that caused it.
func (s *schema) failOnce(format string, args ...any) {
	if s.err != nil {
		return
	}
	if s.m != nil {
		s.err = s.m.fail(format, args...)
		return
	}
	s.err = &snapshot.Error{Offset: -1, Msg: fmt.Sprintf(format, args...)}
}

// renderer prints values as Python would, within the file's text budget.
type renderer struct {
	s   *schema
	buf []byte
}

// keyText is a dict key as text: a string as itself, anything else rendered.
func (s *schema) keyText(k value) string {
	if k.k == kStr {
		s.charge(len(k.str()))
		return k.str()
	}
	return s.render(k)
}

// render prints v as Python would, for settings, key lists and messages.
// Past the file's text budget it returns "" and the schema fails.
func (s *schema) render(v value) string {
	if s.err != nil {
		return ""
	}
	r := renderer{s: s}
	if !r.value(v, 0) {
		// Rendering happens once the pickle is read: no offset to give.
		s.err = &snapshot.Error{Offset: -1, Msg: fmt.Sprintf("a value expands to more than %d bytes of text (memo references to the same containers?): not a snapshot PyTorch wrote", s.textLimit())}
		return ""
	}
	return string(r.buf)
}

// MaxRendered is the text all renders of one file may produce.
const MaxRendered = 1 << 20

// textLimit is the text all renders of one file may produce.
func (s *schema) textLimit() int64 { return MaxRendered }

// add appends text and reports whether the file's budget still holds.
func (r *renderer) add(b ...string) bool {
	for _, x := range b {
		r.s.rendered += int64(len(x))
		if r.s.rendered > r.s.textLimit() {
			return false
		}
		r.buf = append(r.buf, x...)
	}
	return true
}

// value renders v at nesting depth; containers show at most 20 items and
// nothing below depth 4.
func (r *renderer) value(v value, depth int) bool {
	if depth > 4 {
		return r.add("…")
	}
	switch v.k {
	case kNone:
		return r.add("None")
	case kBool:
		if v.n != 0 {
			return r.add("True")
		}
		return r.add("False")
	case kInt:
		return r.add(strconv.FormatInt(v.n, 10))
	case kUint:
		return r.add(strconv.FormatUint(uint64(v.n), 10))
	case kBig:
		return r.add(v.bigint().String())
	case kFloat:
		return r.add(strconv.FormatFloat(math.Float64frombits(uint64(v.n)), 'g', -1, 64))
	case kStr, kBytes:
		if int64(len(v.str())) > r.s.textLimit()-r.s.rendered {
			return false // quoting it would already pass the budget
		}
		return r.add(strconv.Quote(v.str()))
	case kDict:
		d := v.dict()
		if !r.add("{") {
			return false
		}
		for i := range d.keys {
			if i == 20 {
				return r.add(", …}")
			}
			if i > 0 && !r.add(", ") {
				return false
			}
			k := d.keys[i]
			if k.k == kStr {
				if !r.add(k.str()) {
					return false
				}
			} else if !r.value(k, depth+1) {
				return false
			}
			if !r.add(": ") || !r.value(d.vals[i], depth+1) {
				return false
			}
		}
		return r.add("}")
	case kList, kTuple:
		l := v.list()
		if !r.add("[") {
			return false
		}
		for i, it := range l.items {
			if i == 20 {
				return r.add(", …]")
			}
			if i > 0 && !r.add(", ") {
				return false
			}
			if !r.value(it, depth+1) {
				return false
			}
		}
		return r.add("]")
	}
	return r.add(kindName(v.k))
}
