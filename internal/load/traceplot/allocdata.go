package traceplot

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/torchmem/torchmem/internal/load/jsonlex"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/snapshot"
)

// This file reads the trace_plot pages of 2022–23: `let alloc_data = {…}`,
// the JSON that torch/cuda/_memory_viz.py's PlotWriter wrote for its own
// template before pages embedded the pickle (until 2023). Two
// layouts exist:
//
//	{"actions": [e…], "elements": [{"size": n, "info": s}…],
//	 "suffix_table": [[string, next]…], "string_table": [text…],
//	 "initially_allocated": [e…]}
//
// and, from early 2023, "elements_size", "elements_info",
// "elements_category" and "categories" instead of "elements". An element is
// one allocation; actions list element indexes in trace order, the first
// mention allocating, the second freeing (an element initially allocated
// was live before recording: its one mention frees it). An element's info
// indexes suffix_table, a chain of strings: a header ("1.0MiB allocation",
// from 2023 "b7f3a2c000000_0 1.0MiB allocation (1048576 bytes)", whose hex
// is the block's address; an "s" instead of "b" when segments were
// plotted), perhaps a note, then the frames, "file:line:name", innermost
// first. The page has no times, no segments, no device number.

// allocData is what the JSON holds.
type allocData struct {
	actions []int32
	sizes   []int64
	infos   []int32 // −1 for null
	suffix  [][2]int32
	strs    []string
	initial []int32
	layout  string // "elements" (2022) or "elements_size" (2023)
	keys    []string

	initialSet map[int32]bool
}

// allocReader decodes the JSON that follows the marker at input offset base.
type allocReader struct {
	dec  *jsontext.Decoder
	san  *jsonlex.Sanitizer
	base int64
	path string
}

func (r *allocReader) offset() int64 { return r.base + r.san.RawOffset(r.dec.InputOffset()) }

func (r *allocReader) errorf(format string, args ...any) error {
	return &snapshot.Error{Path: r.path, Offset: r.offset(), Msg: "trace_plot alloc_data: " + fmt.Sprintf(format, args...)}
}

// wrap turns a decoder error into an *Error with its input offset.
func (r *allocReader) wrap(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, snapshot.ErrInputTooLarge) {
		return err
	}
	var le *jsonlex.LimitError
	if errors.As(err, &le) {
		return &snapshot.Error{Path: r.path, Offset: r.base + le.Offset, Msg: "trace_plot alloc_data: " + le.Error()}
	}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		msg := "syntax error"
		if se.Err != nil {
			msg = strings.TrimPrefix(se.Err.Error(), "jsontext: ")
		}
		if errors.Is(se.Err, io.ErrUnexpectedEOF) || errors.Is(se.Err, io.EOF) {
			msg = "the page ends inside the JSON (truncated file?)"
		}
		return &snapshot.Error{Path: r.path, Offset: r.base + r.san.RawOffset(se.ByteOffset), Msg: "trace_plot alloc_data: " + msg}
	}
	return &snapshot.Error{Path: r.path, Offset: r.offset(), Msg: "trace_plot alloc_data: " + err.Error()}
}

// readAllocData reads the alloc_data JSON at input offset base and builds
// the model from it.
func readAllocData(in *bufio.Reader, src snapshot.Source, opts snapshot.Options, base int64) (*snapshot.Snapshot, error) {
	opts = opts.WithDefaults()
	san := jsonlex.NewSanitizer(in, opts.MaxDepth, opts.MaxStringBytes)
	r := &allocReader{dec: jsontext.NewDecoder(san, jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true)), san: san, base: base, path: src.Path}
	ad, err := r.read()
	if err != nil {
		return nil, err
	}
	src.Bytes = r.offset()
	return ad.build(src, r.offset())
}

func (r *allocReader) read() (*allocData, error) {
	dec := r.dec
	if dec.PeekKind() != '{' {
		if dec.PeekKind() == 0 {
			_, err := dec.ReadToken()
			return nil, r.wrap(err)
		}
		return nil, r.errorf("not a JSON object")
	}
	dec.ReadToken()
	ad := &allocData{}
	for dec.PeekKind() == '"' {
		kv, err := dec.ReadValue()
		if err != nil {
			return nil, r.wrap(err)
		}
		key := jsonlex.Unquote(kv)
		if len(ad.keys) < 100 {
			ad.keys = append(ad.keys, units.ClipBytes(key, 100))
		}
		switch key {
		case "actions":
			err = r.ints(true, func(v int64) { ad.actions = append(ad.actions, int32(v)) })
		case "initially_allocated":
			err = r.ints(true, func(v int64) { ad.initial = append(ad.initial, int32(v)) })
		case "elements_size":
			ad.layout = "elements_size"
			err = r.ints(false, func(v int64) { ad.sizes = append(ad.sizes, v) })
		case "elements_info":
			ad.layout = "elements_size"
			err = r.ints(true, func(v int64) { ad.infos = append(ad.infos, int32(v)) })
		case "elements":
			ad.layout = "elements"
			err = r.elements(ad)
		case "suffix_table":
			err = r.suffixes(ad)
		case "string_table":
			err = r.strings(ad)
		default:
			err = r.wrap(dec.SkipValue())
		}
		if err != nil {
			return nil, err
		}
	}
	if _, err := dec.ReadToken(); err != nil { // '}'
		return nil, r.wrap(err)
	}
	return ad, nil
}

// intOrNull parses an element index, a size or null (−1) from a raw value.
func (r *allocReader) intOrNull(v jsontext.Value) (int64, error) {
	if string(v) == "null" {
		return -1, nil
	}
	n, ok := jsonlex.ParseInt(v)
	if !ok || n < -1 || n > 1<<62 {
		return 0, r.errorf("%.40q is not an index or a size", string(v))
	}
	return n, nil
}

// array reads an array, calling each for every item (which reads it).
func (r *allocReader) array(what string, each func() error) error {
	dec := r.dec
	if dec.PeekKind() != '[' {
		if dec.PeekKind() == 'n' { // null: absent
			_, err := dec.ReadValue()
			return r.wrap(err)
		}
		return r.errorf("%s is not an array", what)
	}
	dec.ReadToken()
	for {
		switch dec.PeekKind() {
		case ']':
			_, err := dec.ReadToken()
			return r.wrap(err)
		case 0:
			_, err := dec.ReadToken()
			return r.wrap(err)
		}
		if err := each(); err != nil {
			return err
		}
	}
}

// ints reads an array of integers (null as −1); indexes fit in 31 bits.
func (r *allocReader) ints(index bool, add func(int64)) error {
	return r.array("a list of numbers", func() error {
		v, err := r.dec.ReadValue()
		if err != nil {
			return r.wrap(err)
		}
		n, err := r.intOrNull(v)
		if err != nil {
			return err
		}
		if index && n > 1<<31-1 {
			return r.errorf("index %d out of range", n)
		}
		add(n)
		return nil
	})
}

// elements reads the 2022 layout: [{"size": n, "info": s}…].
func (r *allocReader) elements(ad *allocData) error {
	dec := r.dec
	return r.array("elements", func() error {
		if dec.PeekKind() != '{' {
			return r.errorf("an element is not an object")
		}
		dec.ReadToken()
		size, info := int64(0), int64(-1)
		for dec.PeekKind() == '"' {
			kv, err := dec.ReadValue()
			if err != nil {
				return r.wrap(err)
			}
			key := string(kv)
			if k := dec.PeekKind(); k == '{' || k == '[' {
				if err := dec.SkipValue(); err != nil {
					return r.wrap(err)
				}
				continue
			}
			v, err := dec.ReadValue()
			if err != nil {
				return r.wrap(err)
			}
			switch key {
			case `"size"`:
				if size, err = r.intOrNull(v); err != nil {
					return err
				}
			case `"info"`:
				if info, err = r.intOrNull(v); err != nil {
					return err
				}
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			return r.wrap(err)
		}
		ad.sizes = append(ad.sizes, size)
		ad.infos = append(ad.infos, int32(min(info, 1<<31-1)))
		return nil
	})
}

// suffixes reads [[string, next]…].
func (r *allocReader) suffixes(ad *allocData) error {
	dec := r.dec
	return r.array("suffix_table", func() error {
		var e [2]int32
		i := 0
		err := r.array("a suffix_table entry", func() error {
			v, err := dec.ReadValue()
			if err != nil {
				return r.wrap(err)
			}
			n, err := r.intOrNull(v)
			if err != nil {
				return err
			}
			if i < 2 {
				e[i] = int32(min(n, 1<<31-1))
			}
			i++
			return nil
		})
		if err != nil {
			return err
		}
		if i != 2 {
			return r.errorf("suffix_table entry %d has %d items, not 2", len(ad.suffix), i)
		}
		ad.suffix = append(ad.suffix, e)
		return nil
	})
}

// strings reads string_table.
func (r *allocReader) strings(ad *allocData) error {
	return r.array("string_table", func() error {
		v, err := r.dec.ReadValue()
		if err != nil {
			return r.wrap(err)
		}
		if len(v) == 0 || v[0] != '"' {
			return r.errorf("string_table holds a value that is not a string")
		}
		ad.strs = append(ad.strs, jsonlex.Unquote(v))
		return nil
	})
}
