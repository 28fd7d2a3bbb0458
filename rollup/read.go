package rollup

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// ReadSummaries reads the JSON that torchmem writes — analyses
// (torchmem.analysis/v1), arrays of them, and roll-ups (torchmem.rollup/v1,
// whose inputs are read and whose roll-up is dropped: it is built again) —
// as many as r holds one after the other, gzip-compressed or not, and hands
// each analysis to add in order. A roll-up is read as it streams, so its
// size is not held in memory; each analysis, and each other value, may take
// at most limit bytes with its whitespace, and no more than
// result.MaxResultBytes (an analysis is held, then decoded). An analysis
// without an input path takes path.
// Errors name path and the byte offset where the problem is.
// A file that holds no analysis at all (an empty array, a roll-up without
// inputs) is an error.
func ReadSummaries(r io.Reader, path string, limit int64, add func(*result.Result) error) error {
	return ReadSummariesListing(r, path, limit, add, nil)
}

// ReadSummariesListing is ReadSummaries that also hands on, to unreadable,
// the inputs a roll-up lists as unreadable (ignored when it is nil), so
// that a roll-up merged again lists them again.
func ReadSummariesListing(r io.Reader, path string, limit int64, add func(*result.Result) error, unreadable func(Unreadable)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var in io.Reader = br
	if head, _ := br.Peek(2); len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return &snapshot.Error{Path: path, Offset: 0, Msg: "bad gzip header: " + err.Error()}
		}
		in = zr
	}
	sr := &summaryReader{path: path, limit: min(limit, result.MaxResultBytes), budget: &budgetReader{r: in}, unreadable: unreadable}
	sr.add = func(r *result.Result) error {
		sr.added++
		return add(r)
	}
	sr.dec = jsontext.NewDecoder(sr.budget)
	n := 0
	for {
		if sr.dec.PeekKind() == 0 {
			if _, err := sr.dec.ReadToken(); errors.Is(err, io.EOF) {
				if n == 0 {
					return &snapshot.Error{Path: path, Offset: -1, Msg: "no torchmem JSON in the file (empty)"}
				}
				if sr.added == 0 {
					return &snapshot.Error{Path: path, Offset: -1, Msg: "no analysis in the file (an empty list, or a roll-up without inputs)"}
				}
				return nil
			} else if err != nil {
				return sr.fail(err)
			}
		}
		if err := sr.value(true); err != nil {
			return err
		}
		n++
	}
}

// summaryReader walks a stream of torchmem JSON values.
type summaryReader struct {
	path   string
	limit  int64
	add    func(*result.Result) error
	dec    *jsontext.Decoder
	budget *budgetReader
	added  int // analyses handed on
	// unreadable, when set, gets a roll-up's unreadable inputs.
	unreadable func(Unreadable)
}

// value reads one value: an analysis, a roll-up, or (at the top) an array of them.
func (sr *summaryReader) value(top bool) error {
	switch k := sr.dec.PeekKind(); {
	case k == '[' && top:
		if _, err := sr.dec.ReadToken(); err != nil {
			return sr.fail(err)
		}
		for sr.dec.PeekKind() != ']' {
			if sr.dec.PeekKind() == 0 {
				_, err := sr.dec.ReadToken()
				return sr.fail(err)
			}
			if err := sr.value(false); err != nil {
				return err
			}
		}
		_, err := sr.dec.ReadToken()
		return sr.fail(err)
	case k == '{':
		return sr.object()
	default:
		return sr.errorf(sr.dec.InputOffset(), "not torchmem's JSON: want an analysis or a roll-up object (torchmem analyze --format json)")
	}
}

// object reads an analysis or a roll-up. Their members are read one at a
// time: a roll-up's inputs are handed on one by one; an analysis is
// gathered, without its whitespace, and decoded whole.
func (sr *summaryReader) object() error {
	start := sr.dec.InputOffset()
	if _, err := sr.dec.ReadToken(); err != nil {
		return sr.fail(err)
	}
	var schema string
	var whole bytes.Buffer // the analysis's members, compact
	enc := jsontext.NewEncoder(&whole)
	enc.WriteToken(jsontext.BeginObject)
	streamed := 0
	for sr.dec.PeekKind() == '"' {
		name, err := sr.dec.ReadToken()
		if err != nil {
			return sr.fail(err)
		}
		key := name.String()
		if key == "inputs" && schema != result.SchemaID && sr.dec.PeekKind() == '[' {
			n, err := sr.inputs()
			if err != nil {
				return err
			}
			streamed += n
			continue
		}
		sr.budget.allow(sr.dec.InputOffset(), sr.limit)
		if key == "rollup" { // built again from the inputs; its unreadable inputs stay so
			if sr.unreadable == nil {
				if err := sr.dec.SkipValue(); err != nil {
					return sr.fail(err)
				}
				continue
			}
			v, err := sr.dec.ReadValue()
			if err != nil {
				return sr.fail(err)
			}
			var ru struct{ Unreadable []Unreadable }
			if err := json.Unmarshal(v, &ru); err != nil {
				return sr.errorf(start, "rollup.unreadable: want a list of {path, rank, error}: %v", err)
			}
			for _, u := range ru.Unreadable {
				sr.unreadable(u)
			}
			continue
		}
		if key == "schema" {
			if sr.dec.PeekKind() != '"' {
				return sr.errorf(start, "schema is not a string")
			}
			v, err := sr.dec.ReadToken()
			if err != nil {
				return sr.fail(err)
			}
			schema = v.String()
			enc.WriteToken(jsontext.String(key))
			enc.WriteToken(jsontext.String(schema))
			continue
		}
		enc.WriteToken(jsontext.String(key))
		if err := sr.copyValue(enc, &whole, start); err != nil {
			return err
		}
	}
	if _, err := sr.dec.ReadToken(); err != nil { // '}'
		return sr.fail(err)
	}
	enc.WriteToken(jsontext.EndObject)
	switch schema {
	case SchemaID:
		return nil
	case result.SchemaID:
		if streamed > 0 {
			return sr.errorf(start, "an analysis with inputs: not torchmem's JSON")
		}
		return sr.decode(whole.Bytes(), start)
	case "":
		return sr.errorf(start, "a JSON object without a schema: not torchmem's JSON (want %s or %s)", result.SchemaID, SchemaID)
	}
	return sr.errorf(start, "schema %q: want %s (torchmem analyze --format json) or %s", schema, result.SchemaID, SchemaID)
}

// copyValue copies the next value token by token into enc, which writes
// to buf: what is held is the value without its whitespace, never the
// text as read as well (ReadValue kept the value in the decoder's buffer,
// then a copy of it). Past sr.limit bytes it fails.
func (sr *summaryReader) copyValue(enc *jsontext.Encoder, buf *bytes.Buffer, start int64) error {
	depth := 0
	at := sr.dec.InputOffset() // where the value starts: a cut one is named there
	for {
		tok, err := sr.dec.ReadToken()
		if errors.Is(err, io.ErrUnexpectedEOF) && !sr.budget.over {
			return sr.errorf(at, "truncated JSON")
		}
		if err != nil {
			return sr.fail(err)
		}
		switch tok.Kind() {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
		if err := enc.WriteToken(tok); err != nil {
			return sr.errorf(sr.dec.InputOffset(), "bad JSON: %v", err)
		}
		if int64(buf.Len()) > sr.limit {
			return sr.errorf(start, "an analysis past the limit of %d bytes (raise it with --max-input-bytes up to %d)", sr.limit, int64(result.MaxResultBytes))
		}
		if depth == 0 {
			return nil
		}
	}
}

// inputs hands on the analyses of a roll-up's inputs array.
func (sr *summaryReader) inputs() (int, error) {
	if _, err := sr.dec.ReadToken(); err != nil {
		return 0, sr.fail(err)
	}
	n := 0
	var buf bytes.Buffer
	for sr.dec.PeekKind() == '{' {
		start := sr.dec.InputOffset()
		sr.budget.allow(start, sr.limit)
		buf.Reset()
		if err := sr.copyValue(jsontext.NewEncoder(&buf), &buf, start); err != nil {
			return n, err
		}
		if err := sr.decode(buf.Bytes(), start); err != nil {
			return n, err
		}
		n++
	}
	if _, err := sr.dec.ReadToken(); err != nil { // ']'
		return n, sr.fail(err)
	}
	return n, nil
}

// decode decodes one analysis (within result.DecodeResult's bounds)
// and hands it on.
func (sr *summaryReader) decode(v []byte, at int64) error {
	res, err := result.DecodeResult(v)
	var be *result.BoundError
	if errors.As(err, &be) {
		return sr.errorf(at+be.Offset, "not a valid torchmem analysis: %s", be.Msg)
	}
	if err != nil {
		return sr.errorf(at, "%v", err)
	}
	if res.Input.Path == "" {
		res.Input.Path = sr.path
	}
	return sr.add(res)
}

// fail words a decoder error; nil stays nil.
func (sr *summaryReader) fail(err error) error {
	if err == nil {
		return nil
	}
	if sr.budget.over {
		return sr.errorf(sr.dec.InputOffset(), "a JSON value past the limit of %d bytes (raise it with --max-input-bytes)", sr.limit)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return sr.errorf(sr.dec.InputOffset(), "truncated JSON")
	}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		return sr.errorf(se.ByteOffset, "bad JSON: %v", se.Err)
	}
	return &snapshot.Error{Path: sr.path, Offset: -1, Msg: err.Error()}
}

// errorf is a one-line input error naming the file and the byte offset.
func (sr *summaryReader) errorf(at int64, format string, args ...any) error {
	return &snapshot.Error{Path: sr.path, Offset: at, Msg: fmt.Sprintf(format, args...)}
}

// budgetReader fails once more than its allowance was read.
type budgetReader struct {
	r    io.Reader
	n    int64 // bytes read so far
	max  int64 // read no further (0: not set)
	over bool
}

// errOverBudget stops a read past the allowance.
var errOverBudget = errors.New("past the limit")

// allow lets the next value read limit bytes past offset at (plus what the
// decoder may already hold in its buffer).
func (b *budgetReader) allow(at, limit int64) {
	b.max = max(at, 0) + limit + 64<<10
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.max > 0 && b.n >= b.max {
		b.over = true
		return 0, errOverBudget
	}
	if b.max > 0 && int64(len(p)) > b.max-b.n {
		p = p[:b.max-b.n]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	return n, err
}
