package analysis

import (
	"reflect"
	"strconv"
	"unicode/utf8"

	"github.com/torchmem/torchmem/result"
)

// TextBudget bounds the text one run of torchmem prints: every string of
// the results it renders counts where it appears (a site name that 256
// devices share counts 256 times), and once the budget is spent a longer
// string is cut to its first textKeep bytes and a marker. What a run
// prints of a result is then its figures and at most a few renderings of
// the budget's text (torchmem's output budget, cmd/torchmem), however
// often a file names one string: a 7 KB gzip whose one frame name every
// device's sites shared made analyze print 810 MB.
type TextBudget struct {
	left int64
}

// textKeep is what a string keeps once the budget is spent: enough to
// recognise it; no shorter string is ever cut.
const textKeep = 64

// NewTextBudget is a budget of n bytes of text.
func NewTextBudget(n int64) *TextBudget { return &TextBudget{left: n} }

// Grow adds n bytes to the budget (a run's budget grows with its inputs).
func (b *TextBudget) Grow(n int64) { b.left += n }

// Fit charges the strings of r to the budget, in the order a renderer
// prints them (devices in order, each field as declared), and cuts those
// past it; it returns how many it cut.
func (b *TextBudget) Fit(r *result.Result) int {
	cut := 0
	b.fit(reflect.ValueOf(r).Elem(), &cut)
	return cut
}

func (b *TextBudget) fit(v reflect.Value, cut *int) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			b.fit(v.Elem(), cut)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Int64 || v.Type().Elem().Kind() == reflect.Int {
			return // figures
		}
		for i := range v.Len() {
			b.fit(v.Index(i), cut)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				b.fit(v.Field(i), cut)
			}
		}
	case reflect.String:
		s := v.String()
		if cost := textCost(s); b.left >= cost || len(s) <= textKeep+len(textCutMarker)+20 {
			b.left -= cost
			return
		}
		k := textKeep
		for k > 0 && !utf8.RuneStart(s[k]) {
			k--
		}
		short := s[:k] + textCutMarker + strconv.Itoa(len(s)-k) + " bytes]"
		b.left -= textCost(short)
		v.SetString(short)
		*cut++
	}
}

// textCost is what s may take once escaped by any renderer: a control
// character, a quote, a backslash or an HTML special takes six bytes at
// most (\u001b in JSON, \x1b in text, &amp; in HTML), a byte past ASCII
// four (\xff for one that is not UTF-8).
func textCost(s string) int64 {
	n := int64(len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == 0x7f || c == '<' || c == '>' || c == '&' || c == '"' || c == '\\' || c == '\'':
			n += 5
		case c >= 0x80:
			n += 3
		}
	}
	return n
}

// textCutMarker ends a string that TextBudget cut, before the bytes it left
// out.
const textCutMarker = "…[output budget: +"
