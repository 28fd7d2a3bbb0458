package kineto

import (
	"bytes"
	"encoding/binary"

	"github.com/go-json-experiment/json/jsontext"
)

// This file holds the token-level reading of the chrome trace reader: the
// members of an object, values kept in the arena or skipped unread, and peeks
// into the decoder's buffer.

// put appends the text of a raw value to the arena: strings unquoted,
// anything else as written.
func (tr *traceReader) put(v []byte) field {
	off := len(tr.arena)
	if len(v) >= 2 && v[0] == '"' {
		if bytes.IndexByte(v, '\\') < 0 {
			tr.arena = append(tr.arena, v[1:len(v)-1]...)
		} else {
			tr.arena, _ = jsontext.AppendUnquote(tr.arena, v)
		}
	} else {
		tr.arena = append(tr.arena, v...)
	}
	return field{int32(off), int32(len(tr.arena) - off)}
}

// putInt appends the integer v to the arena as a numField field.
func (tr *traceReader) putInt(v int64) field {
	off := len(tr.arena)
	tr.arena = binary.LittleEndian.AppendUint64(tr.arena, uint64(v))
	return field{int32(off), numField}
}

func (tr *traceReader) bytesOf(f field) []byte {
	if f.n < 0 {
		return nil
	}
	return tr.arena[f.off : f.off+f.n]
}

// eachMember reads the object that comes next, through its '}': visit gets
// each member's key as written (quotes and escapes included) and must read
// or skip the member's value.
//
// tr.dec is read again after each member: reading the events array replaces
// it (fastlex.go).
func (tr *traceReader) eachMember(visit func(key []byte) error) error {
	if _, err := tr.dec.ReadToken(); err != nil { // '{'
		return tr.wrap(err)
	}
	for {
		if k := tr.peekMember(); k == '}' || k == 0 { // the end, or the error that stops it
			_, err := tr.dec.ReadToken()
			return tr.wrap(err)
		}
		key, err := tr.dec.ReadValue()
		if err != nil {
			return tr.wrap(err)
		}
		if err := visit(key); err != nil {
			return err
		}
	}
}

// keepValue reads the value of the member being read into dst, or skips it
// when dst is nil; with scalarsOnly, an object or array is skipped token by
// token (never held whole) and ignored.
func (tr *traceReader) keepValue(dst *field, scalarsOnly bool) error {
	if dst == nil {
		return tr.wrap(tr.dec.SkipValue())
	}
	if scalarsOnly {
		if k := tr.peekValue(); k == '{' || k == '[' {
			return tr.wrap(tr.dec.SkipValue())
		}
	}
	v, err := tr.dec.ReadValue()
	if err != nil {
		return tr.wrap(err)
	}
	if scalarsOnly && (v[0] == '{' || v[0] == '[') {
		return nil // not a scalar: ignore the field
	}
	*dst = tr.put(v)
	return nil
}

// peekValue is the first byte of the next value when the decoder's buffer
// holds it (after the member's colon), else the decoder's PeekKind.
func (tr *traceReader) peekValue() byte {
	for _, c := range tr.dec.UnreadBuffer() {
		switch c {
		case ' ', '\t', '\r', '\n', ':':
			continue
		}
		return c
	}
	return byte(tr.dec.PeekKind())
}

// peekMember is dec.PeekKind inside an object, answered from the decoder's
// buffer when the next member's key is already there (the common case, and
// a third of the reader's calls into the decoder). The decoder still checks
// the syntax of everything it is then asked to read.
func (tr *traceReader) peekMember() jsontext.Kind {
	ub := tr.dec.UnreadBuffer()
	for _, c := range ub {
		switch c {
		case ' ', '\t', '\r', '\n', ',':
			continue
		case '"':
			return '"'
		}
		break
	}
	return tr.dec.PeekKind()
}
