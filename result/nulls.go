package result

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// The JSON never shows a value that stands for "none" inside torchmem (an
// event index of −1, a time of 0 µs, a device −1, a reserved figure the
// file does not state): such a field is null. A field says which of its
// values means "none" with a `null` tag: a literal (`null:"-1"`), or
// `null:"if:Field"` for a bool field that says the value is unknown. The
// types that hold such fields marshal through marshalNulls and read back
// through unmarshalNulls, so a baseline read from JSON has the same values
// as the analysis that wrote it.

// nullField is a field with a `null` tag.
type nullField struct {
	index   int
	json    string
	literal string // the value that means none, or ""
	flag    int    // index of the bool field that says unknown, or −1
}

var nullFieldsCache sync.Map // reflect.Type → []nullField

func nullFieldsOf(t reflect.Type) []nullField {
	if v, ok := nullFieldsCache.Load(t); ok {
		return v.([]nullField)
	}
	var out []nullField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("null")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		nf := nullField{index: i, json: name, flag: -1}
		if flag, ok := strings.CutPrefix(tag, "if:"); ok {
			ff, found := t.FieldByName(flag)
			if !found || ff.Type.Kind() != reflect.Bool {
				panic(fmt.Sprintf("analysis: %s.%s: null tag names %q, not a bool field", t.Name(), f.Name, flag))
			}
			nf.flag = ff.Index[0]
		} else {
			nf.literal = tag
		}
		out = append(out, nf)
	}
	nullFieldsCache.Store(t, out)
	return out
}

// isNone reports whether field nf of struct value v holds "none".
func (nf nullField) isNone(v reflect.Value) bool {
	if nf.flag >= 0 {
		return v.Field(nf.flag).Bool()
	}
	f := v.Field(nf.index)
	switch f.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(f.Int(), 10) == nf.literal
	}
	return false
}

// marshalNulls marshals v, a struct given as a type without methods (an
// alias of the real one), writing null for the fields that hold "none".
func marshalNulls(v any) ([]byte, error) {
	b, err := jsonv1.Marshal(v)
	if err != nil {
		return nil, err
	}
	rv := reflect.ValueOf(v)
	nulls := map[string]bool{}
	for _, nf := range nullFieldsOf(rv.Type()) {
		if nf.isNone(rv) {
			nulls[nf.json] = true
		}
	}
	if len(nulls) == 0 {
		return b, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteByte('{')
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		key, _ := json.Marshal(t)
		out.Write(key)
		out.WriteByte(':')
		if nulls[t.(string)] {
			out.WriteString("null")
		} else {
			out.Write(raw)
		}
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

// unmarshalNulls reads what marshalNulls wrote into v, a pointer to a
// struct given as a type without methods: a null field gets back the value
// that means "none" (its literal, or its flag set).
func unmarshalNulls(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return err
	}
	rv := reflect.ValueOf(v).Elem()
	fields := nullFieldsOf(rv.Type())
	if len(fields) == 0 || !bytes.Contains(b, []byte("null")) {
		return nil
	}
	nulls, err := nullMembers(b)
	if err != nil {
		return err
	}
	for _, nf := range fields {
		if !slices.Contains(nulls, nf.json) {
			continue
		}
		if nf.flag >= 0 {
			rv.Field(nf.flag).SetBool(true)
			continue
		}
		f := rv.Field(nf.index)
		n, err := strconv.ParseInt(nf.literal, 10, 64)
		if err != nil {
			return err
		}
		f.SetInt(n)
	}
	return nil
}

// nullMembers lists the names of the members of the JSON object b whose
// value is null, reading b token by token: nothing of the object is copied
// (a map of raw members copied every member of every nested object again,
// 20 bytes allocated for each byte of a baseline).
func nullMembers(b []byte) ([]string, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if _, err := dec.ReadToken(); err != nil { // {
		return nil, err
	}
	var nulls []string
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // before the next call voids the token
		if dec.PeekKind() == 'n' {
			nulls = append(nulls, name)
		}
		if err := dec.SkipValue(); err != nil {
			return nil, err
		}
	}
	return nulls, nil
}
