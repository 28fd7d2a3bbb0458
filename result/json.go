package result

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/snapshot"
)

// Bounds of an analysis JSON read back (a baseline, a side of a diff, an
// input of a roll-up). What is held is the JSON without its whitespace and
// the Result decoded from it; both are bounded here.
const (
	// MaxResultBytes bounds the JSON without whitespace (real analyses are
	// kilobytes to a few MB: a phase row per step and phase).
	MaxResultBytes = 256 << 20
	// MaxResultItems bounds the items of all its arrays together: an empty
	// object of three bytes decodes to a struct of up to 176 bytes (a leak),
	// and decoding grows the slices as it goes (real analyses hold tens of
	// thousands of items: a site, a phase row per step and phase).
	MaxResultItems = 1 << 20
	// MaxResultString bounds one string (site names, evidence, verdicts).
	MaxResultString = 1 << 20
	// MaxFigureBytes is the largest byte figure an analysis may state (1
	// PiB: more than any device holds); a larger or negative one is not an
	// analysis torchmem wrote.
	MaxFigureBytes = 1 << 50
)

// compactJSON reads one JSON document, dropping whitespace outside strings
// and enforcing the bounds above: at most limit bytes kept, MaxResultItems
// array items, MaxResultString bytes a string, snapshot.DefaultMaxDevices
// items in the analysis's "devices" array, snapshot.DefaultMaxDepth levels.
// Errors say what is wrong and the byte offset in the input.
func compactJSON(r io.Reader, limit int64) ([]byte, error) {
	c := jsonCompactor{limit: limit}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		chunk, err := br.Peek(br.Size())
		if len(chunk) == 0 {
			if err == io.EOF || err == nil {
				return c.out, c.end()
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			return nil, err
		}
		if cerr := c.feed(chunk); cerr != nil {
			return nil, cerr
		}
		br.Discard(len(chunk))
		if err != nil && err != bufio.ErrBufferFull && err != io.EOF {
			return nil, err
		}
	}
}

// checkJSON applies compactJSON's bounds to data already in memory, with
// its whitespace (the JSON torchmem writes is indented), copying nothing.
func checkJSON(data []byte, limit int64) error {
	c := jsonCompactor{limit: limit, checkOnly: true}
	if err := c.feed(data); err != nil {
		return err
	}
	return c.end()
}

// jsonCompactor is the state of compactJSON between chunks.
type jsonCompactor struct {
	out       []byte
	checkOnly bool  // count the bytes kept, keep none
	kept      int64 // bytes kept (without whitespace)
	limit     int64
	off       int64 // input bytes seen
	inString  bool
	escape    bool
	strLen    int
	// Containers open: '[' or '{'; for arrays, whether an item is due.
	stack []frame
	items int
	// The key read last in the analysis's own object, and whether the
	// string being read is such a key.
	key     []byte
	readKey bool
	devices int
}

type frame struct {
	kind    byte
	pending bool // array: the next value starts an item; object: a key is due
	devices bool // the analysis's "devices" array
}

func (c *jsonCompactor) fail(format string, args ...any) error {
	return &BoundError{Msg: fmt.Sprintf(format, args...), Offset: c.off}
}

// BoundError is JSON past one of the bounds of an analysis read back, at
// its byte offset in the analysis.
type BoundError struct {
	Msg    string
	Offset int64
}

func (e *BoundError) Error() string { return fmt.Sprintf("%s at byte offset %d", e.Msg, e.Offset) }

// topObject reports whether the innermost container is the analysis's own
// object (the document, or the one item of a top-level array).
func (c *jsonCompactor) topObject() bool {
	n := len(c.stack)
	return n == 1 && c.stack[0].kind == '{' || n == 2 && c.stack[0].kind == '[' && c.stack[1].kind == '{'
}

func (c *jsonCompactor) feed(b []byte) error {
	for i := 0; i < len(b); i, c.off = i+1, c.off+1 {
		ch := b[i]
		if c.inString {
			c.keep(ch)
			if c.strLen++; c.strLen > MaxResultString {
				return c.fail("a string longer than %d bytes", MaxResultString)
			}
			switch {
			case c.escape:
				c.escape = false
			case ch == '\\':
				c.escape = true
			case ch == '"':
				c.inString = false
				if c.readKey {
					c.readKey = false
				}
			default:
				if c.readKey && len(c.key) < 16 {
					c.key = append(c.key, ch)
				}
			}
			continue
		}
		switch ch {
		case ' ', '\t', '\r', '\n':
			continue
		}
		if c.kept >= c.limit {
			return c.fail("more than %d bytes without whitespace", c.limit)
		}
		c.keep(ch)
		n := len(c.stack)
		if n > 0 && c.stack[n-1].kind == '[' && c.stack[n-1].pending && ch != ']' {
			c.stack[n-1].pending = false
			if c.items++; c.items > MaxResultItems {
				return c.fail("more than %d array items", MaxResultItems)
			}
			if c.stack[n-1].devices {
				if c.devices++; c.devices > snapshot.DefaultMaxDevices {
					return c.fail("more than %d devices", snapshot.DefaultMaxDevices)
				}
			}
		}
		switch ch {
		case '"':
			c.inString, c.strLen = true, 0
			if n > 0 && c.stack[n-1].kind == '{' && c.stack[n-1].pending && c.topObject() {
				c.readKey, c.key = true, c.key[:0]
			}
			if n > 0 && c.stack[n-1].kind == '{' {
				c.stack[n-1].pending = false
			}
		case '{', '[':
			if n >= snapshot.DefaultMaxDepth {
				return c.fail("nested deeper than %d levels", snapshot.DefaultMaxDepth)
			}
			f := frame{kind: ch, pending: true}
			if ch == '[' && c.topObject() && string(c.key) == "devices" {
				f.devices = true
			}
			c.stack = append(c.stack, f)
		case '}', ']':
			if n == 0 {
				return c.fail("unbalanced %q", ch)
			}
			c.stack = c.stack[:n-1]
		case ',':
			if n > 0 {
				c.stack[n-1].pending = true
			}
		}
	}
	return nil
}

// keep counts a byte outside whitespace, and keeps it unless checking only.
func (c *jsonCompactor) keep(ch byte) {
	c.kept++
	if !c.checkOnly {
		c.out = append(c.out, ch)
	}
}

func (c *jsonCompactor) end() error {
	if c.inString || len(c.stack) > 0 {
		return c.fail("the JSON ends early (truncated file?)")
	}
	return nil
}

// checkFigures refuses a Result whose byte figures (integer fields whose
// JSON name says bytes — allocated_bytes, bytes_per_step … — and
// categories) are negative or beyond MaxFigureBytes, and words outside their
// vocabulary (checkWord): the gate and the diff compute with the figures.
// The path of the value at fault is built only for the error (building it
// for every item allocated 900 bytes an item).
func checkFigures(v reflect.Value, path string) error {
	if err := figuresOK(v); err != nil {
		return fmt.Errorf("%s%s", path, err.Error())
	}
	return nil
}

// figureError is a value at fault; path is built on the way out
// (".devices", "[0]", ".peak" … in reverse).
type figureError struct {
	path []string
	msg  string
}

func (e *figureError) Error() string {
	var b strings.Builder
	for i := len(e.path) - 1; i >= 0; i-- {
		b.WriteString(e.path[i])
	}
	return b.String() + e.msg
}

func (e *figureError) in(seg string) *figureError {
	e.path = append(e.path, seg)
	return e
}

func figuresOK(v reflect.Value) *figureError {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return figuresOK(v.Elem())
	case reflect.Slice:
		for i := range v.Len() {
			if err := figuresOK(v.Index(i)); err != nil {
				return err.in("[" + strconv.Itoa(i) + "]")
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			fv := v.Field(i)
			if msg := checkWord(fv); msg != "" {
				return &figureError{path: []string{"." + name}, msg: msg}
			}
			if fv.Kind() == reflect.Int64 && strings.Contains(name, "bytes") {
				if n := fv.Int(); n < 0 || n > MaxFigureBytes {
					return &figureError{path: []string{"." + name}, msg: fmt.Sprintf(" is %d bytes: not a figure torchmem writes (0 to 1 PiB)", n)}
				}
				continue
			}
			if err := figuresOK(fv); err != nil {
				return err.in("." + name)
			}
		}
	case reflect.Array:
		if v.Type() == reflect.TypeOf(Categories{}) {
			for i := range v.Len() {
				if n := v.Index(i).Int(); n < 0 || n > MaxFigureBytes {
					return &figureError{path: []string{"." + Category(i).String()}, msg: fmt.Sprintf(" is %d bytes: not a figure torchmem writes (0 to 1 PiB)", n)}
				}
			}
		}
	}
	return nil
}

// CheckBounds checks a Result read from a file: its byte figures (none
// negative or beyond MaxFigureBytes), its words (checkWord, the input's
// format and the devices' kinds), and the bounds an analysis holds to
// (devices). Validate adds the schema.
func (res *Result) CheckBounds() error {
	if n := len(res.Devices); n > snapshot.DefaultMaxDevices {
		return fmt.Errorf("%d devices, more than the limit of %d", n, snapshot.DefaultMaxDevices)
	}
	if !inVocabulary(res.Input.Format, inputFormats) {
		return fmt.Errorf("analysis.input.format is %q: not a format torchmem reads", res.Input.Format)
	}
	if !inVocabulary(res.AllocatedUnit, []string{"", AllocatedUnit, AllocatedUnitTensor}) {
		return fmt.Errorf("analysis.allocated_unit is %q: not a unit torchmem writes", res.AllocatedUnit)
	}
	for i, d := range res.Devices {
		if !inVocabulary(d.Kind, deviceKinds) {
			return fmt.Errorf("analysis.devices[%d].kind is %q: not a device kind torchmem writes", i, d.Kind)
		}
	}
	return checkFigures(reflect.ValueOf(res).Elem(), "analysis")
}

// The words an analysis may hold where the renderers print a word from a
// fixed set as it is (the other strings of a Result are text from the
// input, escaped wherever they are printed); "" prints as nothing.
var (
	inputFormats = []string{"", string(snapshot.FormatSnapshotPickle), string(snapshot.FormatSegmentList), string(snapshot.FormatTracePlotHTML),
		string(snapshot.FormatChromeTrace), string(snapshot.FormatMemoryTimeline)}
	deviceKinds = []string{"", string(snapshot.DeviceCUDA), string(snapshot.DeviceROCm), string(snapshot.DeviceCPU), string(snapshot.DeviceXPU), string(snapshot.DeviceOther)}
	phases      = []string{"", string(PhaseForward), string(PhaseBackward), string(PhaseOptimizer), string(PhaseZeroGrad), string(PhaseData),
		string(PhaseUnknown), string(PhaseBeforeRecording)}
	confidences = []string{"", string(High), string(Medium), string(Low)}
)

// checkWord words a Phase or a Confidence outside its vocabulary ("" when
// v is neither, or a word of it).
func checkWord(v reflect.Value) string {
	switch v.Type() {
	case reflect.TypeOf(Phase("")):
		if !inVocabulary(v.String(), phases) {
			return fmt.Sprintf(" is %q: not a phase torchmem writes", v.String())
		}
	case reflect.TypeOf(Confidence("")):
		if !inVocabulary(v.String(), confidences) {
			return fmt.Sprintf(" is %q: not a confidence torchmem writes", v.String())
		}
	}
	return ""
}

func inVocabulary(w string, words []string) bool {
	return slices.Contains(words, w)
}
